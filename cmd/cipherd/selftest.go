package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/cipherd/cipherd/kernels"
	"github.com/cipherd/cipherd/selftest"
)

func runSelftest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("selftest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "JSON output")
	fail := fs.String("fail", "", "fail these KATs, implementations or ciphers on purpose (comma-separated, * for all; default $CIPHERD_SELFTEST_FAIL)")
	skipBench := fs.Bool("skip-benchmark", false, "choose by order of preference without the quick profile")
	cacheDir := fs.String("cache", "", "directory for the cached profile (default: none, always measure)")
	budget := fs.Duration("budget", selftest.DefaultBudget, "wall time the quick profile aims to spend measuring")
	pin := fs.String("aead", "", "pin the AEAD for new data instead of choosing by speed")
	allowed := fs.String("allowed-aeads", "", "AEADs allowed for new data, comma-separated (default aes-256-gcm,chacha20-poly1305; add aes-128-gcm to allow it)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "cipherd selftest: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := checkFailNames(*fail); err != nil {
		fmt.Fprintln(stderr, "cipherd selftest:", err)
		return 2
	}
	var pinned kernels.Cipher
	if *pin != "" {
		c, err := kernels.ParseCipher(*pin)
		if err != nil {
			fmt.Fprintln(stderr, "cipherd selftest:", err)
			return 2
		}
		pinned = c
	}

	var candidates []kernels.Cipher
	if *allowed != "" {
		var list []kernels.Cipher
		for _, name := range strings.Split(*allowed, ",") {
			c, err := kernels.ParseCipher(strings.TrimSpace(name))
			if err != nil {
				fmt.Fprintln(stderr, "cipherd selftest: -allowed-aeads:", err)
				return 2
			}
			list = append(list, c)
		}
		// the order of preference among the allowed
		for _, c := range selftest.AllCandidates() {
			if slices.Contains(list, c) {
				candidates = append(candidates, c)
			}
		}
		if len(candidates) < len(list) {
			fmt.Fprintf(stderr, "cipherd selftest: -allowed-aeads: only %s can seal new data\n", cipherList(selftest.AllCandidates()))
			return 2
		}
	}

	start := time.Now()
	kat := selftest.RunKATs(selftest.KATConfig{Fail: *fail})
	if err := kat.Err(); err != nil {
		if *asJSON {
			writeJSON(stdout, map[string]any{"kat": kat, "error": err.Error()})
		} else {
			kat.WriteText(stdout)
		}
		fmt.Fprintln(stderr, "cipherd selftest: refusing to run:", err)
		return 1
	}
	sel, err := selftest.Select(ctx, selftest.SelectConfig{
		KAT: kat, Pin: pinned, Candidates: candidates, SkipBenchmark: *skipBench, CacheDir: *cacheDir, Budget: *budget,
	})
	if err != nil {
		if !*asJSON {
			kat.WriteText(stdout)
		}
		fmt.Fprintln(stderr, "cipherd selftest:", err)
		return 1
	}
	total := time.Since(start)
	if *asJSON {
		if err := writeJSON(stdout, map[string]any{"kat": kat, "selection": sel, "total_ns": total}); err != nil {
			return 1
		}
		return 0
	}
	kat.WriteText(stdout)
	fmt.Fprintln(stdout)
	writeSelection(stdout, sel)
	fmt.Fprintf(stdout, "total: %v\n", total.Round(time.Millisecond))
	return 0
}

func writeSelection(w io.Writer, s *selftest.Selection) {
	h := s.Host
	fmt.Fprintf(w, "host: %s %s (family %d, model %d, stepping %d), %d logical cores, GOMAXPROCS %d",
		h.Vendor, h.Brand, h.Family, h.Model, h.Stepping, h.LogicalCores, h.GOMAXPROCS)
	if h.CPUQuota > 0 {
		fmt.Fprintf(w, ", cgroup quota %.2f CPUs", h.CPUQuota)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "features: %s\n", strings.Join(h.Features, " "))
	if len(h.Disabled) > 0 {
		fmt.Fprintf(w, "disabled by GODEBUG: %s\n", strings.Join(h.Disabled, " "))
	}
	switch {
	case s.Cached:
		fmt.Fprintf(w, "profile: cached, measured %s in %v, %d trials per cell\n", s.Measured.Format(time.RFC3339), s.ProfileTime.Round(time.Millisecond), s.Trials)
	case len(s.Profile) > 0:
		fmt.Fprintf(w, "profile: measured in %v, %d interleaved trials per cell\n", s.ProfileTime.Round(time.Millisecond), s.Trials)
	default:
		fmt.Fprintln(w, "profile: skipped")
	}
	if len(s.Profile) > 0 {
		fmt.Fprintf(w, "  %-20s %-10s %11s %10s %21s %8s\n", "cipher", "impl", "size", "median", "range (MB/s)", "trial")
	}
	for _, p := range s.Profile {
		fmt.Fprintf(w, "  %-20s %-10s %5d bytes %10.1f %10.1f–%-10.1f %8v\n",
			p.Cipher, p.Impl, p.Size, p.BytesPerSecond/1e6, p.Min/1e6, p.Max/1e6, p.TrialTime)
	}
	fmt.Fprintln(w, "implementations:")
	for _, c := range s.Implementations {
		fmt.Fprintf(w, "  %-20s %-10s %s\n", c.Name, c.Impl, c.Reason)
		for _, sc := range c.Sizes {
			fmt.Fprintf(w, "  %-20s %-10s %s\n", fmt.Sprintf("  ≤ %d bytes", sc.MaxSize), sc.Impl, sc.Reason)
		}
	}
	fmt.Fprintf(w, "aead for new data: %s (candidates %s; margin at least %.0f%%, more when the trials are noisy)\n  %s\n",
		s.AEADName, strings.Join(s.Candidates, ", "), s.Margin*100, s.AEADReason)
}

func cipherList(cs []kernels.Cipher) string {
	var names []string
	for _, c := range cs {
		names = append(names, c.String())
	}
	return strings.Join(names, ", ")
}
