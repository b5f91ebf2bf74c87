// Package atomicfile replaces files so that a reader, or a process started
// after a crash, sees the old content or the new, never a mix: a 0600
// temporary file in the same directory, fsync, rename over the target, fsync
// of the directory.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces path with data. The temporary file is named
// tempPrefix + random in the same directory, so that a caller can recognise
// and remove what an interrupted write left.
func Write(path string, data []byte, tempPrefix string) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil { // CreateTemp's mode, made explicit
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// SyncDir makes a directory's entries (a rename, a new or removed file) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
