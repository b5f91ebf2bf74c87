package selftest

import (
	"fmt"
	"testing"

	"github.com/cipherd/cipherd/kernels"
)

// BenchmarkSpeedOp runs the very operation `cipherd speed` times, for every
// available implementation at openssl's sizes, so that the two can be compared
// number for number (go test -bench SpeedOp -benchmem ./selftest):
// MB/s here is 1e6 bytes per second, `cipherd speed` prints 1e3 bytes per second.
func BenchmarkSpeedOp(b *testing.B) {
	for _, c := range kernels.Ciphers() {
		for _, im := range kernels.Available(c) {
			for _, size := range DefaultSizes {
				b.Run(fmt.Sprintf("%s/%s/%d", c, im.Name(), size), func(b *testing.B) {
					op, err := newSpeedOp(im, size, false)
					if err != nil {
						b.Fatal(err)
					}
					b.SetBytes(int64(size))
					b.ReportAllocs()
					for b.Loop() {
						op()
					}
				})
			}
		}
	}
}
