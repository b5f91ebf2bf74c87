package cryptosvc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/cipherd/cipherd/kernels"
)

// newTestSealer returns a service with key "k", a sealing key under it,
// and a local sealer of that sealing key.
func newTestSealer(t testing.TB, c kernels.Cipher) (*Service, SealingKey, *LocalSealer) {
	t.Helper()
	s := newTestService(t, c)
	sk, err := s.NewSealingKey(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLocalSealer(sk)
	if err != nil {
		t.Fatal(err)
	}
	return s, sk, l
}

// Messages sealed locally are the service's own: they open as one-shot
// messages and as streams, rewrap by their header, and open again after.
func TestLocalSealOpensOnService(t *testing.T) {
	ctx := context.Background()
	for _, c := range SealAEADs {
		s, sk, l := newTestSealer(t, c)
		if sk.Info.AEAD != c || sk.Info.Mode != ModeEnvelope || len(sk.DataKey) != c.KeySize() {
			t.Fatalf("%s: sealing key %+v", c, sk.Info)
		}
		rng := rand.New(rand.NewPCG(1, uint64(c)))
		for _, n := range []int{0, 1, ChunkSize, 3*ChunkSize + 5} {
			pt := make([]byte, n)
			for i := range pt {
				pt[i] = byte(rng.Uint32())
			}
			ct, err := l.Seal(nil, pt, []byte("ctx"))
			if err != nil || int64(len(ct)) != l.SealedLen(int64(n)) {
				t.Fatalf("%s, %d bytes: Seal: %v, %d bytes, SealedLen %d", c, n, err, len(ct), l.SealedLen(int64(n)))
			}
			if got, info, err := s.Open(ctx, "k", ct, []byte("ctx")); err != nil || !bytes.Equal(got, pt) || info.Version != sk.Info.Version {
				t.Fatalf("%s, %d bytes: Open: %v", c, n, err)
			}
			var stream bytes.Buffer
			w, err := l.EncryptWriter(&stream, []byte("ctx"))
			if err != nil {
				t.Fatal(err)
			}
			w.Write(pt)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			dr, err := s.DecryptReader(ctx, "k", bytes.NewReader(stream.Bytes()), []byte("ctx"))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := io.ReadAll(dr); err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("%s, %d bytes: DecryptReader: %v", c, n, err)
			}
			if _, err := s.RotateKey(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			rw, info, err := s.Rewrap(ctx, "k", stream.Bytes()[:len(sk.Header)], nil)
			if err != nil || info.Version <= sk.Info.Version {
				t.Fatalf("%s: header-only rewrap: %v, %+v", c, err, info)
			}
			moved := append(rw, stream.Bytes()[len(sk.Header):]...)
			if got, _, err := s.Open(ctx, "k", moved, []byte("ctx")); err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("%s, %d bytes: the rewrapped message: %v", c, n, err)
			}
		}
	}
}

// A message key opens its own message, whole, as a stream, at random and
// by range, and nothing else: not another message under the same data key,
// not the same message under another context, not a direct-mode message of
// the same version. It is none of the keys it was derived from.
func TestMessageKeyOpensOneMessage(t *testing.T) {
	ctx := context.Background()
	s, sk, l := newTestSealer(t, kernels.AES256GCM)
	pt := bytes.Repeat([]byte("local opening "), 5000)
	ct1, _ := l.Seal(nil, pt, []byte("a"))
	ct2, _ := l.Seal(nil, pt, []byte("a")) // same data key, same context, another salt
	direct, _, _ := s.Seal(ctx, "k", pt, []byte("a"))
	start := func(ct []byte) []byte {
		n, err := StreamStart(bytes.NewReader(ct), int64(len(ct)))
		if err != nil {
			t.Fatal(err)
		}
		return ct[:n]
	}

	mk, err := s.MessageKey(ctx, "k", start(ct1), []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := NewLocalOpener(mk)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := o.Open(ct1); err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("Open: %v", err)
	}
	dr, err := o.DecryptReader(bytes.NewReader(ct1))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(dr); err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("DecryptReader: %v", err)
	}
	ra, err := o.ReaderAt(bytes.NewReader(ct1), int64(len(ct1)))
	if err != nil || ra.Size() != int64(len(pt)) {
		t.Fatalf("ReaderAt: %v", err)
	}
	part := make([]byte, 1000)
	if _, err := ra.ReadAt(part, 40000); err != nil || !bytes.Equal(part, pt[40000:41000]) {
		t.Fatalf("ReadAt: %v", err)
	}
	rg := Range{Off: 20000, Len: 30000}
	from, to, _, _ := RangeSpan(o.StartLen(), int64(len(ct1)), rg)
	in := append(bytes.Clone(start(ct1)), ct1[from:to]...)
	rr, err := o.DecryptRange(bytes.NewReader(in), int64(len(in)), rg)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(rr); err != nil || !bytes.Equal(got, pt[20000:50000]) {
		t.Fatalf("DecryptRange: %v", err)
	}

	// Not another message: refused by its start, and with the start
	// swapped in, its chunks do not authenticate.
	if _, err := o.Open(ct2); !errors.Is(err, ErrAuthFailed) {
		t.Errorf("another message: %v, want ErrAuthFailed", err)
	}
	for _, other := range [][]byte{ct2, direct} {
		forged := mk
		forged.Start = start(other)
		fo, err := NewLocalOpener(forged)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fo.Open(other); !errors.Is(err, ErrAuthFailed) {
			t.Errorf("the message key on another message's chunks: %v, want ErrAuthFailed", err)
		}
	}
	// Not the same message under another context.
	if _, err := s.MessageKey(ctx, "k", start(ct1), []byte("b")); !errors.Is(err, ErrAuthFailed) {
		t.Errorf("another context: %v, want ErrAuthFailed", err)
	}
	// None of the keys it came from.
	k, err := s.store.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	secret := k.Versions[0].Secret.Expose()
	master := newPRK(secret)
	h, _, _ := ParseHeader(ct1)
	derived := [][]byte{secret, sk.DataKey}
	for _, info := range [][][]byte{
		{[]byte(labelDirect), zeroByte, ianaNames[aeadID(h.AEAD)], zeroByte, (&Header{AEAD: h.AEAD, KeyName: "k", KeyVersion: h.KeyVersion}).prefix()},
		{[]byte(labelWrap), zeroByte, ianaNames[aeadID(h.AEAD)]},
	} {
		b := make([]byte, 32)
		master.expand(b, info...)
		derived = append(derived, b)
	}
	for i, d := range derived {
		if bytes.Contains(d, mk.Key) || bytes.Contains(mk.Key, d[:16]) || bytes.Contains(d, mk.Nonce[:]) {
			t.Errorf("the message key shares bytes with key %d it was derived from", i)
		}
	}
}

// MessageKey takes a message's start and nothing else.
func TestMessageKeyStart(t *testing.T) {
	ctx := context.Background()
	s := newTestService(t, kernels.ChaCha20Poly1305)
	ct, _, _ := s.Seal(ctx, "k", []byte("one-shot"), nil)
	n, _ := StreamStart(bytes.NewReader(ct), int64(len(ct)))
	mk, err := s.MessageKey(ctx, "k", ct[:n], nil)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := NewLocalOpener(mk)
	if got, err := o.Open(ct); err != nil || string(got) != "one-shot" {
		t.Fatalf("a direct-mode message opened locally: %q, %v", got, err)
	}
	for _, c := range []struct {
		start []byte
		want  error
	}{
		{ct[:n-1], ErrTruncated},
		{ct[:n+1], ErrMalformed},
		{ct[:5], ErrTruncated},
	} {
		if _, err := s.MessageKey(ctx, "k", c.start, nil); !errors.Is(err, c.want) {
			t.Errorf("a start of %d bytes (of %d): %v, want %v", len(c.start), n, err, c.want)
		}
	}
	if _, err := s.MessageKey(ctx, "other", ct[:n], nil); err == nil {
		t.Error("a message key under another key name")
	}
}
