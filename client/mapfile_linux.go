//go:build linux

package client

import (
	"math"
	"os"
	"syscall"
	"unsafe"
)

// mapFile maps n bytes of f from off into memory, read-only, and returns
// them with the function that unmaps them.
//
// The page tables of a mapped file are undone page by page: munmap of a
// 1 GiB mapping took 54 ms on one core (strace -T of cipherd encrypt
// --local), a fifth of the seal. So the sealers let each block's pages go
// as they finish it (releasePages), on every core, and the unmap finds
// little left.
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
	// Let the page cache read what it lacks of the file in 2 MiB folios,
	// which map with one fault each where small ones take one per 64 KiB
	// (the kernel's fault-around): a 1 GiB seal of a file so cached takes
	// about 3 700 page faults in all instead of 19 000, and an eighth of
	// the system time (scripts/localbench.sh). Parts already cached keep
	// the folios they were cached in.
	_ = syscall.Madvise(m, syscall.MADV_HUGEPAGE)
	return m[off-start:], func() error { return syscall.Munmap(m) }, nil
}

// releasePages drops the mapping's pages that lie wholly inside p, a
// part of a mapped file that will not be read again. The file's page cache
// keeps them; a later read faults them back in.
func releasePages(p []byte) {
	page := uintptr(os.Getpagesize())
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	skip := (page - addr%page) % page
	if uintptr(len(p)) <= skip {
		return
	}
	n := (uintptr(len(p)) - skip) &^ (page - 1)
	if n > 0 {
		_ = syscall.Madvise(p[skip:skip+n], syscall.MADV_DONTNEED)
	}
}
