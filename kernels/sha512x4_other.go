//go:build !amd64 || !gc || purego

package kernels

// A variable, not a constant, so that the code behind the check is still
// compiled and vetted as on amd64.
var sha512x4Available = false

func sha512x4Blocks(h *[8][4]uint64, p *[4][]byte, blocks int) {
	panic("unreachable")
}
