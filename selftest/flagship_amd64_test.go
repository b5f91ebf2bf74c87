//go:build !purego

package selftest

import (
	"os"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/kernels"
)

// flagshipEnv makes TestFlagshipImplementations fail, rather than skip, when
// a flagship implementation is missing on a CPU that has its features.
// .ci/run sets it: CI runs on the machine class the kernels are tuned for.
const flagshipEnv = "CIPHERD_REQUIRE_FLAGSHIP"

// The implementations the project is tuned for on AVX-512 hosts (Zen 4 and
// Zen 5): losing one quietly, to a wrong feature gate or a failed KAT, would
// leave the service correct and several times slower.
var flagships = []struct {
	cipher kernels.Cipher
	impl   string
}{
	{kernels.AES128GCM, "vaes512"},
	{kernels.AES256GCM, "vaes512"},
	{kernels.AES128CTR, "vaes512"},
	{kernels.AES256CTR, "vaes512"},
	{kernels.ChaCha20, "avx512"},
	{kernels.ChaCha20Poly1305, "avx512"},
}

// cpuinfoFlag is the /proc/cpuinfo flag of each avo feature name a flagship
// requires: the kernel's own report, independent of the cpuid package the
// kernels' gates use.
var cpuinfoFlag = map[string]string{
	"AES": "aes", "AVX": "avx", "AVX2": "avx2", "AVX512F": "avx512f", "AVX512BW": "avx512bw",
	"AVX512VL": "avx512vl", "AVX512IFMA": "avx512ifma", "BMI2": "bmi2", "VAES": "vaes",
	"VPCLMULQDQ": "vpclmulqdq", "PCLMULQDQ": "pclmulqdq",
}

func cpuinfoFlags(t *testing.T) map[string]bool {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
			flags := map[string]bool{}
			for _, f := range strings.Fields(v) {
				flags[f] = true
			}
			return flags
		}
	}
	t.Log("/proc/cpuinfo has no flags line")
	return nil
}

// TestFlagshipImplementations checks that every flagship implementation
// whose features the CPU reports is available and passes its known-answer
// tests.
func TestFlagshipImplementations(t *testing.T) {
	require := os.Getenv(flagshipEnv) == "1"
	missing := t.Skipf
	if require {
		missing = t.Fatalf
	}
	if gd := os.Getenv("GODEBUG"); strings.Contains(gd, "cpu.") {
		t.Skipf("GODEBUG=%s switches CPU features off on purpose", gd)
	}
	flags := cpuinfoFlags(t)
	if flags == nil {
		missing("cannot read the CPU's features from /proc/cpuinfo")
		return
	}
	kat := RunKATs(KATConfig{})
	checked := 0
	for _, f := range flagships {
		im, err := kernels.Lookup(f.cipher, f.impl)
		if err != nil {
			t.Errorf("%s/%s is not registered: %v", f.cipher, f.impl, err)
			continue
		}
		var absent []string
		for _, r := range im.Requires() {
			flag, known := cpuinfoFlag[r]
			if !known {
				t.Errorf("%s requires %s, which this test cannot look up in /proc/cpuinfo", im, r)
			}
			if !flags[flag] {
				absent = append(absent, r)
			}
		}
		if len(absent) > 0 {
			t.Logf("%s: the CPU lacks %s", im, strings.Join(absent, " "))
			continue
		}
		checked++
		switch {
		case !im.Available():
			t.Errorf("%s is unavailable although the CPU has %s", im, strings.Join(im.Requires(), " "))
		case !kat.Passed(im):
			t.Errorf("%s failed its known-answer tests", im)
		}
	}
	if checked == 0 {
		missing("the CPU has the features of no flagship implementation")
	}
}
