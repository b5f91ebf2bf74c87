//go:build !purego

package selftest

import (
	"os"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/kernels"
)

// flagshipEnv makes TestFlagshipImplementations fail, rather than skip, when
// the CPU's features cannot be read or match no flagship. .ci/run sets it.
const flagshipEnv = "CIPHERD_REQUIRE_FLAGSHIP"

// The implementations the project is tuned for, per cipher, fastest first:
// AVX-512 on Zen 4 and Zen 5, AVX2 (with VAES where it exists) on Zen 3 and
// other AVX2 hosts. Losing the best one a CPU can run, to a wrong feature
// gate or a failed KAT, would leave the service correct and several times
// slower.
var flagships = []struct {
	cipher kernels.Cipher
	impls  []string
}{
	{kernels.AES128GCM, []string{"vaes512", "vaes256"}},
	{kernels.AES256GCM, []string{"vaes512", "vaes256"}},
	{kernels.AES128CTR, []string{"vaes512", "vaes256"}},
	{kernels.AES256CTR, []string{"vaes512", "vaes256"}},
	{kernels.ChaCha20, []string{"avx512", "avx2"}},
	{kernels.ChaCha20Poly1305, []string{"avx512", "avx2"}},
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

// TestFlagshipImplementations checks, for each cipher, that the fastest
// flagship implementation whose features the CPU reports is available and
// passes its known-answer tests.
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
		for _, name := range f.impls {
			im, err := kernels.Lookup(f.cipher, name)
			if err != nil {
				t.Errorf("%s/%s is not registered: %v", f.cipher, name, err)
				break
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
			default:
				t.Logf("%s: available, known-answer tests passed", im)
			}
			break // the fastest the CPU can run is the one that matters
		}
	}
	if checked == 0 {
		missing("the CPU has the features of no flagship implementation")
	}
}
