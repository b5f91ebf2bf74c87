//go:build amd64 && gc && !purego

package kernels

import "runtime"

// sha512x4Requires are the CPU features the four-lane kernel needs, as avo
// spells them; sha512x4Funcs are its assembly functions. The gating test
// holds the two to the generated code.
var (
	sha512x4Requires  = []string{"AVX", "AVX2"}
	sha512x4Funcs     = []string{"sha512Block4AVX2"}
	sha512x4Available = cpuHas(sha512x4Requires...)
)

func sha512x4Blocks(h *[8][4]uint64, p *[4][]byte, blocks int) {
	ptrs := [4]*byte{&p[0][0], &p[1][0], &p[2][0], &p[3][0]}
	sha512Block4AVX2(h, &ptrs, blocks)
	runtime.KeepAlive(p)
}
