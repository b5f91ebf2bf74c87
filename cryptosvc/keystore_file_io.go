package cryptosvc

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cipherd/cipherd/internal/atomicfile"
	"go.uber.org/zap"
)

// File-system helpers of the file keystore: every write is atomic and
// durable (temporary file, fsync, rename, fsync of the directory).

// ksMkdir creates dir 0700 if it does not exist, and warns if an existing
// one is open to other users.
func ksMkdir(dir string, log *zap.Logger) error {
	err := os.Mkdir(dir, 0o700)
	if err == nil {
		return ksSyncDir(filepath.Dir(dir))
	}
	if !errors.Is(err, fs.ErrExist) {
		if err2 := os.MkdirAll(dir, 0o700); err2 != nil {
			return fmt.Errorf("cryptosvc: keystore: %w", err2)
		}
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("cryptosvc: keystore: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("cryptosvc: keystore: %s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		log.Warn("keystore directory is accessible to other users; chmod 700 it",
			zap.String("path", dir), zap.Stringer("mode", fi.Mode().Perm()))
	}
	return nil
}

// ksWriteFileAtomic replaces dir/name with data, atomically and durably.
func ksWriteFileAtomic(dir, name string, data []byte) error {
	return atomicfile.Write(filepath.Join(dir, name), data, ksTempPrefix)
}

// ksRemoveTemps removes what interrupted writes left in dir.
func ksRemoveTemps(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("cryptosvc: keystore: %w", err)
	}
	removed := false
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ksTempPrefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("cryptosvc: keystore: removing a partial write: %w", err)
			}
			removed = true
		}
	}
	if removed {
		return ksSyncDir(dir)
	}
	return nil
}

func ksSyncDir(dir string) error { return atomicfile.SyncDir(dir) }

func ksReadSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, ksMaxSealedSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > ksMaxSealedSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrMalformed, ksMaxSealedSize)
	}
	return data, nil
}
