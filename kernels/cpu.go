package kernels

import (
	"os"
	"runtime"
	"strings"

	"github.com/klauspost/cpuid/v2"
)

// This file and vendor_amd64.go are the only files that import cpuid. Every
// dispatch decision reads the package booleans below, which are set once at
// start-up.
//
// cpuid reports AVX, AVX2 and AVX-512 only when the operating system saves the
// matching register state (XGETBV), so a feature listed here is usable.
var (
	hasAESNI      bool
	hasPCLMULQDQ  bool
	hasSSSE3      bool
	hasAVX        bool
	hasAVX2       bool
	hasBMI2       bool
	hasADX        bool
	hasAVX512F    bool
	hasAVX512BW   bool
	hasAVX512VL   bool
	hasAVX512IFMA bool
	hasVAES       bool
	hasVPCLMULQDQ bool
	hasGFNI       bool
	hasSHA        bool
	hasAESARM     bool
	hasPMULL      bool
)

// feature ties a GODEBUG option name to the cpuid feature and the package flag.
type feature struct {
	godebug string // cpu.<godebug>=off turns it off
	label   string // as reported by HostInfo
	id      cpuid.FeatureID
	flag    *bool
	needs   []*bool // features that must also be present (wider forms of one instruction)
}

var features = []feature{
	{"aes", "AES-NI", cpuid.AESNI, &hasAESNI, nil},
	{"pclmulqdq", "PCLMULQDQ", cpuid.CLMUL, &hasPCLMULQDQ, nil},
	{"ssse3", "SSSE3", cpuid.SSSE3, &hasSSSE3, nil},
	{"avx", "AVX", cpuid.AVX, &hasAVX, nil},
	{"avx2", "AVX2", cpuid.AVX2, &hasAVX2, []*bool{&hasAVX}},
	{"bmi2", "BMI2", cpuid.BMI2, &hasBMI2, nil},
	{"adx", "ADX", cpuid.ADX, &hasADX, nil},
	{"avx512f", "AVX-512F", cpuid.AVX512F, &hasAVX512F, []*bool{&hasAVX2}},
	{"avx512bw", "AVX-512BW", cpuid.AVX512BW, &hasAVX512BW, []*bool{&hasAVX512F}},
	{"avx512vl", "AVX-512VL", cpuid.AVX512VL, &hasAVX512VL, []*bool{&hasAVX512F}},
	{"avx512ifma", "AVX-512IFMA", cpuid.AVX512IFMA, &hasAVX512IFMA, []*bool{&hasAVX512F}},
	{"vaes", "VAES", cpuid.VAES, &hasVAES, []*bool{&hasAESNI, &hasAVX}},
	{"vpclmulqdq", "VPCLMULQDQ", cpuid.VPCLMULQDQ, &hasVPCLMULQDQ, []*bool{&hasPCLMULQDQ, &hasAVX}},
	{"gfni", "GFNI", cpuid.GFNI, &hasGFNI, nil},
	{"sha", "SHA-NI", cpuid.SHA, &hasSHA, nil},
	{"aes", "AES (ARMv8)", cpuid.AESARM, &hasAESARM, nil},
	{"pmull", "PMULL", cpuid.PMULL, &hasPMULL, nil},
}

// avoNames maps the ISA names that avo writes in a generated function's
// "// Requires:" line to the flags above. The amd64 baseline (SSE2, CMOV, …)
// is always present.
var avoNames = map[string]*bool{
	"AES":        &hasAESNI,
	"PCLMULQDQ":  &hasPCLMULQDQ,
	"SSSE3":      &hasSSSE3,
	"AVX":        &hasAVX,
	"AVX2":       &hasAVX2,
	"BMI2":       &hasBMI2,
	"ADX":        &hasADX,
	"AVX512F":    &hasAVX512F,
	"AVX512BW":   &hasAVX512BW,
	"AVX512VL":   &hasAVX512VL,
	"AVX512IFMA": &hasAVX512IFMA,
	"VAES":       &hasVAES,
	"VPCLMULQDQ": &hasVPCLMULQDQ,
	"GFNI":       &hasGFNI,
	"SHA":        &hasSHA,
}

// baselineAMD64 holds the names every amd64 processor has. "MMX+" is avo's
// name for the integer part of SSE (PREFETCHh among it), which AMD also
// exposes as a CPUID bit of its own that Intel processors leave clear.
var baselineAMD64 = map[string]bool{"SSE": true, "SSE2": true, "CMOV": true, "CPUID": true, "MMX+": true}

// cpuHas reports whether the host has every named feature (avo's spelling).
// An unknown name is a programming error and panics at start-up.
func cpuHas(names ...string) bool {
	ok := true
	for _, n := range names {
		if baselineAMD64[n] {
			ok = ok && runtime.GOARCH == "amd64"
			continue
		}
		f, known := avoNames[n]
		if !known {
			panic("kernels: cpuHas: unknown CPU feature " + n)
		}
		ok = ok && *f
	}
	return ok
}

// disabledByGODEBUG lists the features switched off by GODEBUG=cpu.<name>=off
// (or cpu.all=off), the same settings Go's runtime honours for the standard
// library's own assembly.
var disabledByGODEBUG []string

// The flags are set during package variable initialisation, which completes
// before any init function runs, so every file's init may register
// implementations gated on them whatever the order of the files.
var _ = detectFeatures()

func detectFeatures() struct{} {
	off := godebugCPUOff(os.Getenv("GODEBUG"))
	for _, f := range features {
		on := cpuid.CPU.Supports(f.id)
		if on && (off["all"] || off[f.godebug]) {
			on = false
			disabledByGODEBUG = append(disabledByGODEBUG, f.label)
		}
		for _, n := range f.needs {
			on = on && *n
		}
		*f.flag = on
	}
	return struct{}{}
}

// godebugCPUOff returns the cpu.* options set to "off" in a GODEBUG value.
func godebugCPUOff(godebug string) map[string]bool {
	off := make(map[string]bool)
	for _, kv := range strings.Split(godebug, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		name, isCPU := strings.CutPrefix(k, "cpu.")
		if ok && isCPU && v == "off" {
			off[name] = true
		}
	}
	return off
}

// Host describes the processor as the kernels see it.
type Host struct {
	Vendor       string   `json:"vendor"`
	Brand        string   `json:"brand"`
	Family       int      `json:"family"`
	Model        int      `json:"model"`
	Stepping     int      `json:"stepping"`
	Hypervisor   string   `json:"hypervisor,omitempty"`
	LogicalCores int      `json:"logical_cores"`
	GOARCH       string   `json:"goarch"`
	Features     []string `json:"features"`           // crypto-relevant features in use
	Disabled     []string `json:"disabled,omitempty"` // present but switched off by GODEBUG
}

// HostInfo returns the processor's identity and the crypto-relevant features
// the kernels will use.
func HostInfo() Host {
	h := Host{
		Vendor:       cpuid.CPU.VendorString,
		Brand:        strings.TrimSpace(cpuid.CPU.BrandName),
		Family:       cpuid.CPU.Family,
		Model:        cpuid.CPU.Model,
		Stepping:     cpuid.CPU.Stepping,
		LogicalCores: cpuid.CPU.LogicalCores,
		GOARCH:       runtime.GOARCH,
		Features:     []string{},
		Disabled:     disabledByGODEBUG,
	}
	if cpuid.CPU.HypervisorVendorID != cpuid.VendorUnknown || cpuid.CPU.HypervisorVendorString != "" {
		h.Hypervisor = cpuid.CPU.HypervisorVendorString
	}
	if h.LogicalCores == 0 {
		h.LogicalCores = runtime.NumCPU()
	}
	for _, f := range features {
		if *f.flag {
			h.Features = append(h.Features, f.label)
		}
	}
	return h
}

// HardwareAES reports whether this host has AES and carry-less multiplication
// instructions, the condition under which AES-GCM is preferred over
// ChaCha20-Poly1305 at equal speed.
func HardwareAES() bool { return hasAESNI && hasPCLMULQDQ || hasAESARM && hasPMULL }
