package selftest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cipherd/cipherd/kernels"
)

// ErrNoOpenSSL is returned when no openssl binary is found on PATH.
var ErrNoOpenSSL = errors.New("selftest: no openssl binary found on PATH (install OpenSSL, e.g. apt-get install openssl, to compare)")

// ErrOpenSSLUnsupported is returned when the host's openssl cannot measure a cipher.
var ErrOpenSSLUnsupported = errors.New("selftest: cipher not supported by this openssl")

// CompareOpenSSL measures cfg's ciphers with Speed and with the host's
// `openssl speed -elapsed -evp`, cipher by cipher in turn so that both see the
// same machine conditions, with the same sizes, duration (whole seconds, at
// least one, as openssl takes them), worker count and direction. Ciphers the
// local openssl does not support are missing from theirs.
//
// theirs.Program names the binary that ran and the version it reports.
func CompareOpenSSL(ctx context.Context, cfg SpeedConfig) (ours, theirs *SpeedResult, err error) {
	name := cfg.OpenSSL
	if name == "" {
		name = "openssl"
	}
	prog, err := FindOpenSSL(ctx, name)
	var notFound *exec.Error // LookPath's: name is not on PATH
	if errors.As(err, &notFound) && cfg.OpenSSL == "" {
		return nil, nil, ErrNoOpenSSL
	}
	if err != nil {
		return nil, nil, err
	}
	bin, version := prog.Path, prog.Version
	ciphers := cfg.Ciphers
	if ciphers == nil {
		ciphers = kernels.Ciphers()
	}
	for _, c := range ciphers {
		one := cfg
		one.Ciphers = []kernels.Cipher{c}
		r, err := Speed(ctx, one)
		if err != nil {
			return nil, nil, err
		}
		if ours == nil {
			ours = r
		} else {
			ours.Rows = append(ours.Rows, r.Rows...)
		}
		if theirs == nil {
			theirs = &SpeedResult{Host: r.Host, Started: r.Started, Seconds: openSSLSeconds(r.Seconds), Trials: 1, Multi: r.Multi, Decrypt: r.Decrypt, Sizes: r.Sizes,
				Program: &Program{Path: bin, Version: version}}
		}
		row, err := OpenSSLSpeed(ctx, bin, c, r.Sizes, time.Duration(r.Seconds*float64(time.Second)), r.Multi, r.Decrypt)
		switch {
		case errors.Is(err, ErrOpenSSLUnsupported):
		case err != nil:
			return nil, nil, err
		default:
			theirs.Rows = append(theirs.Rows, *row)
		}
	}
	return ours, theirs, nil
}

func openSSLSeconds(s float64) float64 { return max(1, math.Round(s)) }

// Program names the benchmark program that measured a result other than
// cipherd itself.
type Program struct {
	Path    string `json:"path"`
	Version string `json:"version"` // its own words, e.g. "OpenSSL 3.0.19 27 Jan 2026 (Library: …)"
}

// FindOpenSSL looks up the openssl binary name (a path, or a name on PATH)
// and returns its absolute path and the version it reports.
func FindOpenSSL(ctx context.Context, name string) (Program, error) {
	bin, err := exec.LookPath(name)
	if err != nil {
		return Program{}, fmt.Errorf("selftest: openssl binary %s: %w", name, err)
	}
	if abs, err := filepath.Abs(bin); err == nil {
		bin = abs
	}
	version, err := openSSLVersion(ctx, bin)
	return Program{Path: bin, Version: version}, err
}

// openSSLVersion returns the first line of `bin version`.
func openSSLVersion(ctx context.Context, bin string) (string, error) {
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return "", fmt.Errorf("selftest: %s version: %w", bin, err)
	}
	return firstLine(string(out)), nil
}

// OpenSSLSpeed runs `openssl speed -elapsed -mr -evp c` (bin is the openssl
// binary) and returns its figures for sizes.
func OpenSSLSpeed(ctx context.Context, bin string, c kernels.Cipher, sizes []int, d time.Duration, multi int, decrypt bool) (*SpeedRow, error) {
	base := []string{"speed", "-elapsed", "-mr", "-seconds", strconv.Itoa(int(openSSLSeconds(d.Seconds()))), "-evp", c.String()}
	if multi > 1 {
		base = append(base, "-multi", strconv.Itoa(multi))
	}
	if decrypt {
		base = append(base, "-decrypt")
	}
	// openssl measures either its default sizes or one size given with -bytes.
	runs := [][]string{base}
	if !slices.Equal(sizes, DefaultSizes) {
		runs = runs[:0]
		for _, n := range sizes {
			runs = append(runs, append(slices.Clip(base), "-bytes", strconv.Itoa(n)))
		}
	}
	row := &SpeedRow{Cipher: c, Name: c.DisplayName(), Impl: "openssl"}
	for _, args := range runs {
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if strings.Contains(stderr.String(), "unknown cipher") || strings.Contains(stderr.String(), "unsupported") {
				return nil, fmt.Errorf("%w: %s", ErrOpenSSLUnsupported, c)
			}
			return nil, fmt.Errorf("selftest: %s %s: %v: %s", bin, strings.Join(args, " "), err, firstLine(stderr.String()))
		}
		hdr, rates, err := parseOpenSSLMR(stdout.String())
		if err != nil {
			return nil, fmt.Errorf("selftest: %s %s: %w", bin, strings.Join(args, " "), err)
		}
		for i, n := range hdr {
			// openssl -mr reports rates only: record one second's worth of
			// operations so that the cell's rate is openssl's.
			row.Cells = append(row.Cells, SpeedCell{Size: n, Ops: int64(math.Round(rates[i] / float64(n))), Elapsed: time.Second})
		}
	}
	return row, nil
}

// parseOpenSSLMR reads the "+H:" and first "+F:" lines of `openssl speed -mr`
// (the sizes, and the bytes per second at each size).
func parseOpenSSLMR(out string) (sizes []int, rates []float64, err error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		// With -multi, the children's header arrives relayed as
		// "Got: +H:… from N"; the parent prints only the summed "+F:" line.
		if rest, ok := strings.CutPrefix(line, "Got: +H:"); ok {
			rest, _, _ = strings.Cut(rest, " ")
			line = "+H:" + rest
		}
		switch {
		case strings.HasPrefix(line, "+H:"):
			sizes = sizes[:0]
			for _, f := range strings.Split(line[3:], ":") {
				n, err := strconv.Atoi(f)
				if err != nil {
					return nil, nil, fmt.Errorf("bad +H line %q", line)
				}
				sizes = append(sizes, n)
			}
		case strings.HasPrefix(line, "+F:") && rates == nil:
			f := strings.Split(line, ":")
			if len(f) < 3 {
				return nil, nil, fmt.Errorf("bad +F line %q", line)
			}
			for _, v := range f[3:] {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return nil, nil, fmt.Errorf("bad +F line %q", line)
				}
				rates = append(rates, x)
			}
		}
	}
	if len(sizes) == 0 || len(rates) != len(sizes) {
		return nil, nil, fmt.Errorf("no +H/+F result in openssl output")
	}
	return sizes, rates, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
