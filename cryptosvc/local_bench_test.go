package cryptosvc

import (
	"bytes"
	"io"
	"testing"

	"github.com/cipherd/cipherd/kernels"
)

func benchSealer(b *testing.B, c kernels.Cipher) *LocalSealer {
	_, _, l := newTestSealer(b, c)
	return l
}

// BenchmarkLocalSeal seals 1 KiB messages with one cached sealing key: the
// cost per message of a client's local sealer, and apart from it the key
// derivation every message makes (salt, HKDF-Expand-SHA-512, AEAD keying),
// which the format requires per message.
//
//	go test -run '^$' -bench LocalSeal -count 5 ./cryptosvc
func BenchmarkLocalSeal(b *testing.B) {
	for _, c := range SealAEADs {
		l := benchSealer(b, c)
		pt := make([]byte, 1024)
		ctx := []byte("tenant 42")
		b.Run(c.String()+"/1KiB", func(b *testing.B) {
			b.SetBytes(int64(len(pt)))
			b.ReportAllocs()
			dst := make([]byte, 0, l.SealedLen(int64(len(pt))))
			for b.Loop() {
				if _, err := l.Seal(dst[:0], pt, ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		// What Seal derives per message: four messages' keys at a time where
		// the host has kernels.SHA512x4, and one message's alone.
		b.Run(c.String()+"/derive", func(b *testing.B) {
			dst := make([]byte, 0, 256)
			for b.Loop() {
				keys, _, err := startBodyAhead(dst[:0], &l.ahead, l.rand, l.im, l.input, ctx)
				if err != nil {
					b.Fatal(err)
				}
				keys.release()
			}
		})
		b.Run(c.String()+"/derive-one", func(b *testing.B) {
			dst := make([]byte, 0, 256)
			for b.Loop() {
				keys, _, err := startBody(dst[:0], l.rand, l.im, l.input, ctx)
				if err != nil {
					b.Fatal(err)
				}
				keys.release()
			}
		})
	}
}

// BenchmarkLocalSealStream seals a 64 MiB stream into io.Discard through a
// local sealer's EncryptWriter, 1 MiB per write, on one goroutine, and
// through SealStream, which reads blocks while other goroutines seal them,
// and through SealBytes, whose goroutines seal straight from memory:
// the local sealer's bulk rate, to compare with `cipherd speed -evp <aead>
// -bytes 16384`, the kernel's own on 16 KiB buffers and one core.
//
//	go test -run '^$' -bench LocalSealStream -count 5 ./cryptosvc
func BenchmarkLocalSealStream(b *testing.B) {
	for _, c := range SealAEADs {
		l := benchSealer(b, c)
		buf := make([]byte, 1<<20)
		b.Run(c.String()+"/EncryptWriter", func(b *testing.B) {
			b.SetBytes(64 << 20)
			for b.Loop() {
				w, err := l.EncryptWriter(io.Discard, nil)
				if err != nil {
					b.Fatal(err)
				}
				for range 64 {
					w.Write(buf)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
		src := bytes.Repeat(buf, 64)
		b.Run(c.String()+"/SealStream", func(b *testing.B) {
			b.SetBytes(64 << 20)
			for b.Loop() {
				if _, err := l.SealStream(io.Discard, bytes.NewReader(src), nil, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.String()+"/SealBytes", func(b *testing.B) {
			b.SetBytes(64 << 20)
			for b.Loop() {
				if _, err := l.SealBytes(io.Discard, src, nil, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
