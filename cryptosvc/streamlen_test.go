package cryptosvc

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/cipherd/cipherd/kernels"
)

// The lengths a server announces before streaming are the lengths the
// streams have: SealedLen of the plaintext's length is the sealed stream's,
// and PlaintextLen of that is the plaintext's; no other sealed length has a
// plaintext length.
func TestStreamLengths(t *testing.T) {
	ctx := context.Background()
	s := newTestService(t, kernels.AES256GCM)
	for _, n := range []int{0, 1, 15, 16, 17, ChunkSize - 1, ChunkSize, ChunkSize + 1, 2*ChunkSize - 1, 2 * ChunkSize, 5*ChunkSize + 123} {
		pt := bytes.Repeat([]byte{'p'}, n)
		er, err := s.EncryptReader(ctx, "k", bytes.NewReader(pt), nil)
		if err != nil {
			t.Fatal(err)
		}
		sealed, err := io.ReadAll(er)
		if err != nil {
			t.Fatal(err)
		}
		if got := er.SealedLen(int64(n)); got != int64(len(sealed)) {
			t.Fatalf("%d bytes: SealedLen %d, the stream has %d", n, got, len(sealed))
		}
		dr, err := s.DecryptReader(ctx, "k", bytes.NewReader(sealed), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := dr.PlaintextLen(int64(len(sealed))); !ok || got != int64(n) {
			t.Fatalf("%d bytes: PlaintextLen of %d is %d, %v", n, len(sealed), got, ok)
		}
		// Every other length near it is one no stream has, or one of
		// another plaintext length.
		for d := int64(-40); d <= 40; d++ {
			if d == 0 {
				continue
			}
			if got, ok := dr.PlaintextLen(int64(len(sealed)) + d); ok && got == int64(n) {
				t.Fatalf("%d bytes: PlaintextLen of %d, %d off the stream's, is %d too", n, int64(len(sealed))+d, d, got)
			}
		}
	}
	for _, m := range []int64{0, 15, ChunkSize + tagSize, ChunkSize + tagSize + 15, 2 * (ChunkSize + tagSize)} {
		if n, ok := plaintextLen(m); ok {
			t.Errorf("chunks of %d bytes have a plaintext length (%d): no stream ends so", m, n)
		}
	}
}
