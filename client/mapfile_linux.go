//go:build linux

package client

import (
	"math"
	"os"
	"syscall"
)

// mapFile maps n bytes of f from off into memory, read-only, and returns
// them with the function that unmaps them.
func mapFile(f *os.File, off, n int64) ([]byte, func() error, error) {
	page := int64(os.Getpagesize())
	start := off &^ (page - 1)
	if n+off-start > math.MaxInt {
		return nil, nil, errNoMap
	}
	m, err := syscall.Mmap(int(f.Fd()), start, int(n+off-start), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	// Read ahead of the workers, which fault the pages in in order.
	_ = syscall.Madvise(m, syscall.MADV_SEQUENTIAL)
	return m[off-start:], func() error { return syscall.Munmap(m) }, nil
}
