//go:build unix

package server

import "syscall"

// verifyAlloc maps n bytes of anonymous memory: the kernel backs a page
// only when it is first written, and verifyFree returns the pages at once.
// The pages are zeroed by the kernel before any reuse, so the plaintext
// they held goes nowhere.
func verifyAlloc(n int) ([]byte, error) {
	if n == 0 {
		return []byte{}, nil
	}
	return syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
}

func verifyFree(b []byte) {
	if cap(b) > 0 {
		syscall.Munmap(b[:cap(b)])
	}
}
