package cryptosvc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/iotest"
	"unsafe"

	"github.com/cipherd/cipherd/kernels"
)

// SealStream and SealBytes make, byte for byte, the message EncryptWriter makes with the
// same salt, whatever the length against the block and chunk sizes and the
// number of workers, and the service opens it.
func TestSealStreamSameAsEncryptWriter(t *testing.T) {
	ctx := context.Background()
	for _, c := range SealAEADs {
		s, _, l := newTestSealer(t, c)
		salt := bytes.Repeat([]byte{7}, saltSize)
		rng := rand.New(rand.NewPCG(9, uint64(c)))
		const block = parallelBlock * ChunkSize
		for _, n := range []int{0, 1, ChunkSize - 1, ChunkSize, ChunkSize + 1, block - 1, block, block + 1, 2 * block, 3*block + 5*ChunkSize + 77} {
			pt := make([]byte, n)
			for i := range pt {
				pt[i] = byte(rng.Uint32())
			}
			var want bytes.Buffer
			l.rand = bytes.NewReader(salt)
			w, err := l.EncryptWriter(&want, []byte("ctx"))
			if err != nil {
				t.Fatal(err)
			}
			w.Write(pt)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			for _, workers := range []int{1, 2, 3} {
				var got bytes.Buffer
				l.rand = bytes.NewReader(salt)
				// One byte at a time for small inputs, so that blocks
				// are gathered from many short reads.
				var src io.Reader = bytes.NewReader(pt)
				if n < 3*ChunkSize {
					src = iotest.OneByteReader(src)
				}
				m, err := l.SealStream(&got, src, []byte("ctx"), workers)
				if err != nil || m != int64(n) || !bytes.Equal(got.Bytes(), want.Bytes()) {
					t.Fatalf("%s, %d bytes, %d workers: %v, %d read, equal %v", c, n, workers, err, m, bytes.Equal(got.Bytes(), want.Bytes()))
				}
				got.Reset()
				l.rand = bytes.NewReader(salt)
				m, err = l.SealBytes(&got, pt, []byte("ctx"), workers)
				if err != nil || m != int64(n) || !bytes.Equal(got.Bytes(), want.Bytes()) {
					t.Fatalf("SealBytes: %s, %d bytes, %d workers: %v, %d read, equal %v", c, n, workers, err, m, bytes.Equal(got.Bytes(), want.Bytes()))
				}
			}
			if got, _, err := s.Open(ctx, "k", want.Bytes(), []byte("ctx")); err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("%s, %d bytes: Open: %v", c, n, err)
			}
		}
	}
}

type failAfter struct {
	w io.Writer
	n int
}

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("disk full")
	}
	f.n--
	return f.w.Write(p)
}

// A failed read or write ends SealStream with an error, never a message
// that passes for complete.
func TestSealStreamFailures(t *testing.T) {
	s, _, l := newTestSealer(t, kernels.AES256GCM)
	pt := make([]byte, 10*parallelBlock*ChunkSize)
	broken := io.MultiReader(bytes.NewReader(pt[:3*parallelBlock*ChunkSize+5]), iotest.ErrReader(errors.New("read failed")))
	var out bytes.Buffer
	if _, err := l.SealStream(&out, broken, nil, 2); err == nil || err.Error() != "read failed" {
		t.Errorf("a failed read: %v", err)
	}
	if _, _, err := s.Open(context.Background(), "k", out.Bytes(), nil); err == nil {
		t.Error("the output of a failed read opens")
	}
	if _, err := l.SealStream(&failAfter{w: io.Discard, n: 3}, bytes.NewReader(pt), nil, 2); err == nil {
		t.Error("a failed write: no error")
	}
}

// SealBytesDone hands each block of the plaintext to done once, all of it,
// and the message is SealBytes's.
func TestSealBytesDone(t *testing.T) {
	s, _, l := newTestSealer(t, kernels.AES256GCM)
	const size = 5*parallelBlock*ChunkSize + 3*ChunkSize + 7
	pt := bytes.Repeat([]byte("released blocks "), size/16+1)[:size]
	base := uintptr(unsafe.Pointer(unsafe.SliceData(pt)))
	var mu sync.Mutex
	seen := make([]int, size/ChunkSize+1) // times each chunk was handed over
	var sealed bytes.Buffer
	n, err := l.SealBytesDone(&sealed, pt, nil, 3, func(block []byte) {
		off := int(uintptr(unsafe.Pointer(unsafe.SliceData(block))) - base)
		mu.Lock()
		defer mu.Unlock()
		for c := off / ChunkSize; c*ChunkSize < off+len(block); c++ {
			seen[c]++
		}
	})
	if err != nil || n != size {
		t.Fatalf("SealBytesDone: %d, %v", n, err)
	}
	for c, k := range seen {
		if k != 1 {
			t.Fatalf("chunk %d handed to done %d times", c, k)
		}
	}
	if got, _, err := s.Open(context.Background(), "k", sealed.Bytes(), nil); err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("the message does not open: %v", err)
	}
}
