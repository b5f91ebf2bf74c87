//go:build amd64 && gc && !purego

package kernels

import "github.com/klauspost/cpuid/v2"

// amdFamily19h is set on AMD processors of family 19h (Zen 3 and Zen 4, of
// which Zen 4 has AVX-512), for the few choices between equivalent kernels
// that cores make differently (chachaWide17). It lives beside the assembly
// dispatch it serves, so that purego builds, which have no such choice, do
// not carry it.
var amdFamily19h = cpuid.CPU.VendorID == cpuid.AMD && cpuid.CPU.Family == 0x19

// amdFamily1Ah is set on AMD processors of family 1Ah (Zen 5), whose vector
// integer instructions take 2 cycles where the general-purpose ones take 1:
// there the one-block ChaCha20-Poly1305 kernel runs half of its rounds in
// general-purpose registers (shortSplit), and raw ChaCha20 a lone block
// (chachaOneScalar).
var amdFamily1Ah = cpuid.CPU.VendorID == cpuid.AMD && cpuid.CPU.Family == 0x1a
