// Command chachapoly generates the ChaCha20, Poly1305 and ChaCha20-Poly1305
// kernels, one assembly file per run, chosen by -file:
//
//   - chacha20: kernels/chacha20_amd64.s, the ChaCha20 keystream kernels
//     (chacha20.go, avx512.go, avx2.go, scalar.go, wide.go);
//   - poly1305: kernels/poly1305_amd64.s, the MULX and IFMA Poly1305 kernels
//     (poly1305.go);
//   - chachapoly: kernels/chachapoly_amd64.s, the kernels only
//     ChaCha20-Poly1305 uses: the 2- and 4-block keystreams of short messages
//     (short.go) and ChaCha20 stitched with Poly1305 for long ones
//     (head.go, stitched.go, fused.go).
//
// The three share one module because the stitched kernels are built from the
// other two: ChaCha20's double rounds and transpose, and Poly1305's IFMA
// steps, emitted as streams of instructions (stream.go) and interleaved.
package main

//go:generate go run . -file chacha20 -out ../../chacha20_amd64.s -stubs ../../chacha20_stub_amd64.go -pkg kernels
//go:generate go run . -file poly1305 -out ../../poly1305_amd64.s -stubs ../../poly1305_stub_amd64.go -pkg kernels
//go:generate go run . -file chachapoly -out ../../chachapoly_amd64.s -stubs ../../chachapoly_stub_amd64.go -pkg kernels

import (
	"flag"
	"fmt"
	"os"

	. "github.com/mmcloughlin/avo/build"
)

var file = flag.String("file", "", "which assembly file to emit: chacha20, poly1305 or chachapoly")

func main() {
	flag.Parse()
	ConstraintExpr("amd64,gc,!purego")
	switch *file {
	case "chacha20":
		chacha20File()
	case "poly1305":
		poly1305File()
	case "chachapoly":
		chachapolyFile()
	default:
		fmt.Fprintf(os.Stderr, "chachapoly: unknown -file %q\n", *file)
		os.Exit(2)
	}
	Generate()
}

// chachapolyFile emits the kernels of kernels/chachapoly_amd64.s.
func chachapolyFile() {
	shortKernels()
	stitchedKernels()
}
