package client_test

import (
	"context"
	"testing"

	"github.com/cipherd/cipherd/client"
)

// BenchmarkLocalSealer seals 1 KiB messages through a LocalSealer against
// a listening service with its default limits: one sealing key for 2^20
// messages, so 10^6 messages cost one service call, and the rest is the
// per-message key derivation and seal (cryptosvc's BenchmarkLocalSeal
// splits the two).
//
//	go test -run '^$' -bench LocalSealer -benchtime 1000000x -count 5 ./client
func BenchmarkLocalSealer(b *testing.B) {
	base, _ := startServer(b)
	c := newClient(b, base)
	ctx := context.Background()
	l, err := c.NewLocalSealer("default", client.LocalLimits{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.Seal(ctx, nil, nil); err != nil { // the sealing key
		b.Fatal(err)
	}
	pt := make([]byte, 1024)
	aad := []byte("tenant 42")
	for _, append := range []bool{false, true} {
		name := "Seal"
		if append {
			name = "AppendSeal"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(pt)))
			b.ReportAllocs()
			var dst []byte
			for b.Loop() {
				var err error
				if append {
					dst, err = l.AppendSeal(ctx, dst[:0], pt, aad)
				} else {
					_, err = l.Seal(ctx, pt, aad)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
