package kernels

import (
	"maps"
	"slices"
	"testing"
)

func TestGODEBUGCPUOff(t *testing.T) {
	for in, want := range map[string][]string{
		"":                                       nil,
		"cpu.aes=off":                            {"aes"},
		"cpu.aes=on":                             nil,
		"http2debug=1, cpu.avx2=off,cpu.all=off": {"all", "avx2"},
		"cpu.vaes=off,cpuaes=off,cpu.x":          {"vaes"},
		"fips140=on,cpu.pclmulqdq=off":           {"pclmulqdq"},
	} {
		got := slices.Sorted(maps.Keys(godebugCPUOff(in)))
		if !slices.Equal(got, want) {
			t.Errorf("godebugCPUOff(%q) = %v, want %v", in, got, want)
		}
	}
}

// Every feature that needs another is off when that one is: a kernel gated on
// VAES must never run where AES-NI or AVX was switched off.
func TestFeatureDependencies(t *testing.T) {
	for _, f := range features {
		for _, n := range f.needs {
			if *f.flag && !*n {
				t.Errorf("%s is on although a feature it needs is off", f.label)
			}
		}
	}
	h := HostInfo()
	if h.GOARCH == "" || h.LogicalCores <= 0 {
		t.Errorf("HostInfo: %+v", h)
	}
	for _, f := range features {
		if *f.flag != slices.Contains(h.Features, f.label) {
			t.Errorf("HostInfo lists %s as %v, flag is %v", f.label, !*f.flag, *f.flag)
		}
	}
}
