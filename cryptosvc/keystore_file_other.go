//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package cryptosvc

import (
	"fmt"
	"os"
	"runtime"
)

// ksLockDir: without flock(2) this build cannot keep a second process out
// of the directory, and two writers would corrupt it, so the file keystore
// refuses to open. Use a keyring file (OpenKeyring) or another Keystore.
func ksLockDir(path string) (*os.File, error) {
	return nil, fmt.Errorf("%w: the file keystore needs flock(2) to lock %s, which this build for %s lacks", ErrUnsupported, path, runtime.GOOS)
}
