package cryptosvc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/cipherd/cipherd/kernels"
)

func newTestService(t testing.TB, aead kernels.Cipher) *Service {
	t.Helper()
	s, err := New(Config{Keystore: NewMemStore(), AEAD: aead})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateKey(context.Background(), "k", KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSealOpenRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, c := range SealAEADs {
		s := newTestService(t, c)
		for _, n := range []int{0, 1, 100, ChunkSize - 1, ChunkSize, ChunkSize + 1, 3*ChunkSize + 5} {
			pt := bytes.Repeat([]byte{byte(n)}, n)
			ct, info, err := s.Seal(ctx, "k", pt, []byte("ctx"))
			if err != nil {
				t.Fatal(err)
			}
			if info.AEAD != c || info.Version == 0 || info.Key != "k" {
				t.Fatalf("info %+v", info)
			}
			if n == 0 && len(ct) > 100+1 {
				t.Errorf("%s: empty message is %d bytes", c, len(ct))
			}
			got, _, err := s.Open(ctx, "k", ct, []byte("ctx"))
			if err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("%s n=%d: open: %v", c, n, err)
			}
			if _, _, err := s.Open(ctx, "k", ct, []byte("ctX")); !errors.Is(err, ErrAuthFailed) {
				t.Fatalf("%s n=%d: wrong context: %v", c, n, err)
			}
			// Streaming decrypt of a one-shot message.
			r, err := s.DecryptReader(ctx, "", bytes.NewReader(ct), []byte("ctx"))
			if err != nil {
				t.Fatal(err)
			}
			got, err = io.ReadAll(r)
			if err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("%s n=%d: stream open: %v", c, n, err)
			}
			// Stream, then every way of reading it back.
			var buf bytes.Buffer
			w, err := s.EncryptWriter(ctx, "k", &buf, []byte("ctx"))
			if err != nil {
				t.Fatal(err)
			}
			w.Write(pt[:n/2])
			w.Write(pt[n/2:])
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got, _, err = s.Open(ctx, "k", buf.Bytes(), []byte("ctx"))
			if err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("%s n=%d: open of stream: %v", c, n, err)
			}
			ra, err := s.DecryptReaderAt(ctx, "k", bytes.NewReader(buf.Bytes()), int64(buf.Len()), []byte("ctx"))
			if err != nil || ra.Size() != int64(n) {
				t.Fatalf("%s n=%d: readerat: %v", c, n, err)
			}
			if n > 2 {
				p := make([]byte, n-2)
				if k, err := ra.ReadAt(p, 1); k != n-2 || err != nil || !bytes.Equal(p, pt[1:n-1]) {
					t.Fatalf("%s n=%d: ReadAt: %d %v", c, n, k, err)
				}
			}
			// Rotate and rewrap the stream's header.
			if _, err := s.RotateKey(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			re, info, err := s.Rewrap(ctx, "k", buf.Bytes(), nil)
			if err != nil || info.Version < 2 {
				t.Fatalf("rewrap: %v %+v", err, info)
			}
			got, _, err = s.Open(ctx, "k", re, []byte("ctx"))
			if err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("%s n=%d: open of rewrapped stream: %v", c, n, err)
			}
		}
	}
}

func TestEncryptReader(t *testing.T) {
	ctx := context.Background()
	s := newTestService(t, kernels.AES128GCM)
	for _, n := range []int{0, 5, ChunkSize, ChunkSize + 1, 2 * ChunkSize} {
		pt := bytes.Repeat([]byte{7}, n)
		r, err := s.EncryptReader(ctx, "k", bytes.NewReader(pt), []byte("c"))
		if err != nil {
			t.Fatal(err)
		}
		ct, err := io.ReadAll(iotest.OneByteReader(r))
		if err != nil {
			t.Fatal(err)
		}
		got, info, err := s.Open(ctx, "k", ct, []byte("c"))
		if err != nil || !bytes.Equal(got, pt) || info.Mode != ModeEnvelope {
			t.Fatalf("n=%d: %v", n, err)
		}
	}
	// A source error is returned, and stays.
	r, _ := s.EncryptReader(ctx, "k", iotest.ErrReader(io.ErrClosedPipe), nil)
	if _, err := io.ReadAll(r); err != io.ErrClosedPipe {
		t.Fatalf("source error: %v", err)
	}
	if _, err := r.Read(make([]byte, 1)); err != io.ErrClosedPipe {
		t.Fatalf("error not sticky: %v", err)
	}
}
