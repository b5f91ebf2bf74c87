package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/cipherd/cipherd/kernels"
	"github.com/cipherd/cipherd/selftest"
)

// hwOffGODEBUG switches off the hardware paths of the Go runtime, the standard
// library, golang.org/x/sys/cpu and cipherd's own kernels (which read the same
// settings, and drop VAES and VPCLMULQDQ with AES and PCLMULQDQ).
const hwOffGODEBUG = "cpu.aes=off,cpu.pclmulqdq=off,cpu.ssse3=off,cpu.sse41=off,cpu.avx=off,cpu.avx2=off,cpu.avx512f=off,cpu.bmi2=off,cpu.adx=off"

// hwOffEnv marks the re-executed child of `speed -hw off`.
const hwOffEnv = "CIPHERD_SPEED_HW_OFF"

// listFlag collects a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

type speedFlags struct {
	evp       listFlag
	seconds   float64
	bytes     int
	multi     int
	mr        bool
	asJSON    bool
	impl      string
	vsOpenSSL bool
	openssl   string
	hw        string
	decrypt   bool
	elapsed   bool
}

func runSpeed(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f speedFlags
	fs := flag.NewFlagSet("speed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Var(&f.evp, "evp", "cipher to measure, as openssl names it (repeatable; names may also follow the flags)")
	fs.Float64Var(&f.seconds, "seconds", selftest.DefaultSeconds, "seconds per cell")
	fs.IntVar(&f.bytes, "bytes", 0, "measure this one message size instead of 16, 64, 256, 1024, 8192 and 16384")
	fs.IntVar(&f.multi, "multi", 1, "run this many workers in parallel and report their total")
	fs.BoolVar(&f.mr, "mr", false, "machine-readable output (+H: and +F: lines)")
	fs.BoolVar(&f.asJSON, "json", false, "JSON output")
	fs.StringVar(&f.impl, "impl", "", "implementation to measure: a name (stdlib, xcrypto, …) or all; default the preferred one")
	fs.BoolVar(&f.vsOpenSSL, "vs-openssl", false, "also run the host's `openssl speed -elapsed`, cipher by cipher, and print ratios")
	fs.StringVar(&f.openssl, "openssl", "", "with -vs-openssl: the openssl binary to run, a path or a name in PATH (default openssl)")
	fs.StringVar(&f.hw, "hw", "on", "off: measure with hardware acceleration disabled (AES-NI, PCLMULQDQ, AVX…)")
	fs.BoolVar(&f.decrypt, "decrypt", false, "measure decryption (Open for AEADs) instead of encryption")
	fs.BoolVar(&f.elapsed, "elapsed", true, "accepted for openssl compatibility: timing is always wall-clock")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cipherd speed [flags] [cipher ...]")
		fmt.Fprintln(stderr, "\nciphers:", cipherNames())
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	names, err := parseInterspersed(fs, args)
	if err != nil {
		return 2
	}
	names = append([]string(f.evp), names...)
	ciphers, err := parseCiphers(names)
	if err != nil {
		fmt.Fprintln(stderr, "cipherd speed:", err)
		return 2
	}
	switch {
	case f.seconds <= 0:
		fmt.Fprintln(stderr, "cipherd speed: -seconds must be positive")
		return 2
	case f.bytes < 0, f.multi < 1:
		fmt.Fprintln(stderr, "cipherd speed: -bytes and -multi must be positive")
		return 2
	case f.hw != "on" && f.hw != "off":
		fmt.Fprintln(stderr, "cipherd speed: -hw takes on or off")
		return 2
	case f.mr && f.asJSON:
		fmt.Fprintln(stderr, "cipherd speed: choose one of -mr and -json")
		return 2
	}
	if f.hw == "off" && os.Getenv(hwOffEnv) == "" {
		return reexecHWOff(ctx, args, stdout, stderr)
	}

	kat := selftest.RunKATs(selftest.KATConfig{})
	if err := kat.Err(); err != nil {
		kat.WriteText(stderr)
		fmt.Fprintln(stderr, "cipherd speed:", err)
		return 1
	}
	for _, r := range kat.Failures() {
		fmt.Fprintf(stderr, "cipherd speed: %s excluded: failed known-answer test %s\n", r.Impl, r.KAT)
	}

	cfg := selftest.SpeedConfig{
		Ciphers:    ciphers,
		Impl:       f.impl,
		Duration:   time.Duration(f.seconds * float64(time.Second)),
		Multi:      f.multi,
		Decrypt:    f.decrypt,
		KAT:        kat,
		OpenSSL:    f.openssl,
		Progress:   stderr,
		ProgressMR: f.mr,
	}
	if f.bytes > 0 {
		cfg.Sizes = []int{f.bytes}
	}
	if f.vsOpenSSL {
		return speedVsOpenSSL(ctx, cfg, f, stdout, stderr)
	}
	res, err := selftest.Speed(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "cipherd speed:", err)
		return 1
	}
	switch {
	case f.asJSON:
		err = writeJSON(stdout, res)
	case f.mr:
		err = res.WriteMR(stdout)
	default:
		err = res.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "cipherd speed:", err)
		return 1
	}
	return 0
}

func speedVsOpenSSL(ctx context.Context, cfg selftest.SpeedConfig, f speedFlags, stdout, stderr io.Writer) int {
	ours, theirs, err := selftest.CompareOpenSSL(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "cipherd speed:", err)
		return 1
	}
	switch {
	case f.asJSON:
		err = writeJSON(stdout, map[string]*selftest.SpeedResult{"cipherd": ours, "openssl": theirs})
	case f.mr:
		if err = ours.WriteMR(stdout); err == nil {
			err = theirs.WriteMR(stdout)
		}
	default:
		err = selftest.WriteComparison(stdout, ours, theirs)
	}
	if err != nil {
		fmt.Fprintln(stderr, "cipherd speed:", err)
		return 1
	}
	return 0
}

// reexecHWOff runs this same command again with the hardware paths switched
// off through GODEBUG, which Go reads only at process start.
func reexecHWOff(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "cipherd speed: -hw off:", err)
		return 1
	}
	godebug := hwOffGODEBUG
	if old := os.Getenv("GODEBUG"); old != "" {
		godebug = old + "," + godebug
	}
	cmd := exec.CommandContext(ctx, exe, append([]string{"speed"}, args...)...)
	cmd.Env = append(os.Environ(), "GODEBUG="+godebug, hwOffEnv+"=1")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		fmt.Fprintln(stderr, "cipherd speed: -hw off:", err)
		return 1
	}
	return 0
}

// parseInterspersed parses flags that may come before, between or after
// positional arguments, and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func parseCiphers(names []string) ([]kernels.Cipher, error) {
	if len(names) == 0 {
		return nil, nil // all
	}
	var cs []kernels.Cipher
	for _, n := range names {
		c, err := kernels.ParseCipher(n)
		if err != nil {
			return nil, fmt.Errorf("unknown cipher %q (known: %s)", n, cipherNames())
		}
		cs = append(cs, c)
	}
	return cs, nil
}

func cipherNames() string {
	var names []string
	for _, c := range kernels.Ciphers() {
		names = append(names, c.String())
	}
	return strings.Join(names, " ")
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
