//go:build linux

package kernels

import (
	"os"
	"syscall"
	"testing"
)

// Buffers next to inaccessible pages, so that a kernel reading or writing
// one byte outside its data faults. The canaries of the other tests catch
// stray writes only; these also catch stray reads.

// guardPages maps a readable and writable region of n pages between two
// inaccessible pages, so that any access just before or just past it faults.
func guardPages(t *testing.T, n int) []byte {
	t.Helper()
	ps := os.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, (n+2)*ps, syscall.PROT_NONE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	region := mem[ps : (n+1)*ps]
	if err := syscall.Mprotect(region, syscall.PROT_READ|syscall.PROT_WRITE); err != nil {
		t.Fatalf("mprotect: %v", err)
	}
	return region
}
