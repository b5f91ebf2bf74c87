package cryptosvc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// DecryptWriter opens streams and one-shot messages of every AEAD however the
// ciphertext is cut into writes, and refuses what is short, long, or under
// another key.
func TestDecryptWriter(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range SealAEADs {
		s := newTestService(t, c)
		for _, n := range []int{0, 1, 100, ChunkSize - 1, ChunkSize, ChunkSize + 1, 3*ChunkSize + 5} {
			pt := make([]byte, n)
			for i := range pt {
				pt[i] = byte(rng.Uint32())
			}
			oneShot, _, err := s.Seal(ctx, "k", pt, []byte("ctx"))
			if err != nil {
				t.Fatal(err)
			}
			var streamed bytes.Buffer
			ew, err := s.EncryptWriter(ctx, "k", &streamed, []byte("ctx"))
			if err != nil {
				t.Fatal(err)
			}
			ew.Write(pt)
			if err := ew.Close(); err != nil {
				t.Fatal(err)
			}
			for _, ct := range [][]byte{oneShot, streamed.Bytes()} {
				for _, cut := range []string{"whole", "bytes", "random"} {
					var out bytes.Buffer
					dw := s.DecryptWriter(ctx, "k", &out, []byte("ctx"))
					if err := writePieces(dw, ct, cut, rng); err != nil {
						t.Fatalf("%s n=%d %s: %v", c, n, cut, err)
					}
					if err := dw.Close(); err != nil || !bytes.Equal(out.Bytes(), pt) {
						t.Fatalf("%s n=%d %s: Close %v, %d bytes out", c, n, cut, err, out.Len())
					}
					if info := dw.Info(); info.AEAD != c || info.Key != "k" || info.Version != 1 {
						t.Errorf("%s: Info %+v", c, info)
					}
					if _, err := dw.Write([]byte{1}); err != ErrClosed {
						t.Errorf("Write after Close: %v, want ErrClosed", err)
					}
					if err := dw.Close(); err != nil {
						t.Errorf("second Close: %v", err)
					}
				}
			}
			ct := streamed.Bytes()
			// Cut anywhere: the end is missing, never mistaken for one.
			for _, at := range []int{0, 3, len(ct) / 2, len(ct) - tagSize, len(ct) - 1} {
				if at < 0 {
					continue
				}
				dw := s.DecryptWriter(ctx, "k", io.Discard, []byte("ctx"))
				_, err := dw.Write(ct[:at])
				if err == nil {
					err = dw.Close()
				}
				if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrAuthFailed) {
					t.Errorf("%s n=%d cut at %d: %v, want truncated", c, n, at, err)
				}
			}
			// Trailing data, another context, another key.
			for _, tc := range []struct {
				ct   []byte
				key  string
				ctx  string
				want error
			}{
				{append(bytes.Clone(ct), 0), "k", "ctx", ErrAuthFailed},
				{ct, "k", "ctX", ErrAuthFailed},
				{ct, "other", "ctx", ErrKeyMismatch},
			} {
				dw := s.DecryptWriter(ctx, tc.key, io.Discard, []byte(tc.ctx))
				_, err := dw.Write(tc.ct)
				if err == nil {
					err = dw.Close()
				}
				if !errors.Is(err, tc.want) {
					t.Errorf("%s n=%d: %v, want %v", c, n, err, tc.want)
				}
			}
		}
	}
}

func writePieces(w io.Writer, b []byte, cut string, rng *rand.Rand) error {
	for len(b) > 0 {
		k := len(b)
		switch cut {
		case "bytes":
			k = 1 + rng.IntN(3)
		case "random":
			k = rng.IntN(3*ChunkSize) + 1
		}
		k = min(k, len(b))
		if _, err := w.Write(b[:k]); err != nil {
			return err
		}
		b = b[k:]
	}
	return nil
}
