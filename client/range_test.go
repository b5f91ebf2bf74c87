package client_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"sync/atomic"
	"testing"

	"github.com/cipherd/cipherd/client"
)

// countingReaderAt counts the bytes read from it.
type countingReaderAt struct {
	r io.ReaderAt
	n atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

// DecryptRange opens exactly the range asked, cut at the plaintext's end,
// reading little more than the range from its source; a range past the end
// and a tampered source fail, and no failure passes for plaintext.
func TestClientDecryptRange(t *testing.T) {
	base, _ := startServer(t)
	c := newClient(t, base)
	ctx := context.Background()
	const chunk = 16 << 10
	pt := make([]byte, 40*chunk+999)
	rand.Read(pt)
	var sealed bytes.Buffer
	if _, err := c.EncryptStream(ctx, "default", &sealed, bytes.NewReader(pt), []byte("c")); err != nil {
		t.Fatal(err)
	}
	ct := sealed.Bytes()
	size := int64(len(ct))
	for _, rg := range []struct{ off, n int64 }{
		{0, 1}, {0, -1}, {chunk - 1, 2}, {7 * chunk, 5 * chunk}, {7*chunk + 3, 5 * chunk}, {int64(len(pt)) - 1, 1}, {30 * chunk, 1 << 40},
	} {
		src := &countingReaderAt{r: bytes.NewReader(ct)}
		var out bytes.Buffer
		info, err := c.DecryptRange(ctx, "default", &out, src, size, rg.off, rg.n, []byte("c"))
		end := int64(len(pt))
		if rg.n >= 0 {
			end = min(end, rg.off+rg.n)
		}
		if err != nil || !bytes.Equal(out.Bytes(), pt[rg.off:end]) || info.Written != end-rg.off {
			t.Fatalf("range %d+%d: %v, %d bytes (want %d)", rg.off, rg.n, err, out.Len(), end-rg.off)
		}
		// The header (a few dozen bytes) is read twice: to find the
		// stream's start, and to send it.
		if most := (end - rg.off) + 2*(chunk+16) + 2*200; src.n.Load() > most {
			t.Errorf("range %d+%d: read %d bytes of the source, over %d", rg.off, rg.n, src.n.Load(), most)
		}
	}

	var out bytes.Buffer
	if _, err := c.DecryptRange(ctx, "default", &out, bytes.NewReader(ct), size, int64(len(pt)), -1, []byte("c")); !errors.Is(err, client.ErrRangeNotSatisfiable) {
		t.Errorf("a range from the end: %v, want ErrRangeNotSatisfiable", err)
	}
	if _, err := c.DecryptRange(ctx, "default", &out, bytes.NewReader(ct), size, 0, 10, []byte("other")); !errors.Is(err, client.ErrDecryptFailed) {
		t.Errorf("another context: %v, want ErrDecryptFailed", err)
	}
	// A flipped byte in the range's last chunk: the answer is cut, and
	// what came is the range's.
	bad := bytes.Clone(ct)
	bad[len(bad)-100] ^= 1
	out.Reset()
	_, err := c.DecryptRange(ctx, "default", &out, bytes.NewReader(bad), size, 20*chunk, -1, []byte("c"))
	if !errors.Is(err, client.ErrIncompleteStream) || !bytes.HasPrefix(pt[20*chunk:], out.Bytes()) {
		t.Errorf("a tampered final chunk: %v, %d bytes, prefix %v", err, out.Len(), bytes.HasPrefix(pt[20*chunk:], out.Bytes()))
	}
	// The stream cut at a chunk boundary: a range to the end is truncated.
	cut := ct[:size-int64(999+16)]
	if _, err := c.DecryptRange(ctx, "default", &out, bytes.NewReader(cut), int64(len(cut)), 20*chunk, -1, []byte("c")); !errors.Is(err, client.ErrTruncated) {
		t.Errorf("a stream cut at a chunk boundary: %v, want ErrTruncated", err)
	}
}
