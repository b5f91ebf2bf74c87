//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package cryptosvc

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// ksLockDir opens (creating) the lock file at path and takes an exclusive
// flock(2) on it without waiting. flock locks belong to the open file
// description, so a second open in the same process conflicts too, and the
// kernel drops the lock when the holder exits, however it exits. Closing
// the returned file releases the lock.
func ksLockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cryptosvc: keystore: %w", err)
	}
	rc, err := f.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) {
			for {
				err = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
				if err != syscall.EINTR {
					return
				}
			}
		})
		if err == nil {
			err = cerr
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is held", ErrLocked, path)
		}
		return nil, fmt.Errorf("cryptosvc: keystore: locking %s: %w", path, err)
	}
	return f, nil
}
