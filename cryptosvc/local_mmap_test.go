//go:build unix

package cryptosvc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cipherd/cipherd/kernels"
)

// SealBytes seals a memory-mapped file, and a file cut short under the
// mapping ends the seal with ErrSourceFault instead of a crash.
func TestSealBytesMappedFile(t *testing.T) {
	s, _, l := newTestSealer(t, kernels.AES256GCM)
	const size = 8 * parallelBlock * ChunkSize
	pt := bytes.Repeat([]byte("mapped plaintext"), size/16)
	path := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(path, pt, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)

	var sealed bytes.Buffer
	if n, err := l.SealBytes(&sealed, m, nil, 2); err != nil || n != size {
		t.Fatalf("SealBytes of the mapped file: %d, %v", n, err)
	}
	if got, _, err := s.Open(context.Background(), "k", sealed.Bytes(), nil); err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("the sealed mapped file does not open: %v", err)
	}

	if err := os.Truncate(path, 3*parallelBlock*ChunkSize+100); err != nil {
		t.Fatal(err)
	}
	sealed.Reset()
	n, err := l.SealBytes(&sealed, m, nil, 2)
	if !errors.Is(err, ErrSourceFault) {
		t.Fatalf("SealBytes of a truncated mapping: %d, %v; want ErrSourceFault", n, err)
	}
	if _, _, err := s.Open(context.Background(), "k", sealed.Bytes(), nil); err == nil {
		t.Error("the output of a truncated mapping opens")
	}
}
