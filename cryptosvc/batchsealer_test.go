package cryptosvc

import (
	"bytes"
	"context"
	"testing"
)

// TestBatchSealerMatchesSeal: a BatchSealer's messages open like Seal's, are as long
// as SealedLen says, land after what dst held, and differ per message (a
// salt of their own); they keep the version the BatchSealer was made with.
func TestBatchSealerMatchesSeal(t *testing.T) {
	ctx := context.Background()
	for _, c := range SealAEADs {
		s := newTestService(t, c)
		z, err := s.BatchSealer(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if info := z.Info(); info.Key != "k" || info.Version != 1 || info.AEAD != c || info.Mode != ModeDirect {
			t.Fatalf("%s: info %+v", c, info)
		}
		ref, _, err := s.Seal(ctx, "k", []byte("x"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.RotateKey(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, 1, 64, ChunkSize - 1, ChunkSize, 2*ChunkSize + 3} {
			pt := bytes.Repeat([]byte{byte(n + 1)}, n)
			dst := []byte("prefix")
			out, err := z.AppendSeal(dst, pt, []byte("ctx"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(out, []byte("prefix")) {
				t.Fatalf("%s/%d: dst overwritten", c, n)
			}
			msg := out[len("prefix"):]
			if len(msg) != z.SealedLen(n) {
				t.Errorf("%s/%d: %d bytes, SealedLen %d", c, n, len(msg), z.SealedLen(n))
			}
			if n == 1 && len(msg) != len(ref) {
				t.Errorf("%s: %d bytes, Seal's %d", c, len(msg), len(ref))
			}
			got, info, err := s.Open(ctx, "k", msg, []byte("ctx"))
			if err != nil || !bytes.Equal(got, pt) || info.Version != 1 {
				t.Fatalf("%s/%d: open: %v, version %d", c, n, err, info.Version)
			}
			if _, _, err := s.Open(ctx, "k", msg, []byte("other")); err == nil {
				t.Fatalf("%s/%d: opened under another context", c, n)
			}
			again, _ := z.AppendSeal(nil, pt, []byte("ctx"))
			if bytes.Equal(again, msg) {
				t.Fatalf("%s/%d: two messages alike", c, n)
			}
		}
	}
	if _, err := newTestService(t, 0).BatchSealer(ctx, "missing"); err == nil {
		t.Error("a BatchSealer for a missing key")
	}
}

// TestMaxSealedLen: no message or stream of n bytes is longer, in either
// mode, with the longest key name.
func TestMaxSealedLen(t *testing.T) {
	ctx := context.Background()
	s, err := New(Config{Keystore: NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	name := string(bytes.Repeat([]byte("k"), MaxKeyNameLen))
	if _, err := s.CreateKey(ctx, name, KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, ChunkSize - 1, ChunkSize, ChunkSize + 1, 5 * ChunkSize} {
		pt := make([]byte, n)
		direct, _, err := s.Seal(ctx, name, pt, nil)
		if err != nil {
			t.Fatal(err)
		}
		var stream bytes.Buffer
		w, err := s.EncryptWriter(ctx, name, &stream, nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(pt)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if m := MaxSealedLen(int64(n)); int64(len(direct)) > m || int64(stream.Len()) > m || m-int64(stream.Len()) > 64 {
			t.Errorf("%d bytes: direct %d, stream %d, MaxSealedLen %d", n, len(direct), stream.Len(), m)
		}
	}
}
