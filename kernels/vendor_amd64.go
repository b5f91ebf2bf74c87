//go:build amd64 && gc && !purego

package kernels

import "github.com/klauspost/cpuid/v2"

// vendorAMD is set on AMD (and Hygon) processors, for the few choices
// between equivalent kernels that their cores and Intel's make differently
// (chachaWide17). It lives beside the assembly dispatch it serves, so that
// purego builds, which have no such choice, do not carry it.
var vendorAMD = cpuid.CPU.VendorID == cpuid.AMD || cpuid.CPU.VendorID == cpuid.Hygon
