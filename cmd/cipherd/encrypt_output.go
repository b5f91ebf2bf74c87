package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cipherd/cipherd/internal/atomicfile"
)

// input opens what encrypt and decrypt read: a file, or standard input for
// "-". size is the number of bytes to read when known (a regular file, also
// behind standard input), else -1.
func input(path string) (r io.ReadCloser, size int64, err error) {
	if path == "-" {
		f, ok := stdin.(*os.File)
		if !ok {
			return io.NopCloser(stdin), -1, nil
		}
		return io.NopCloser(f), regularSize(f), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, -1, err
	}
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		f.Close()
		return nil, -1, fmt.Errorf("%s is a directory", path)
	}
	return f, regularSize(f), nil
}

// regularFile returns the file input opened at path, when it is one.
func regularFile(in io.Reader, path string) *os.File {
	if path == "-" {
		in = stdin
	}
	f, _ := in.(*os.File)
	return f
}

// regularSize returns what is left to read of a regular file, else -1.
func regularSize(f *os.File) int64 {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return -1
	}
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil || off > fi.Size() {
		return -1
	}
	return fi.Size() - off
}

// output is where encrypt and decrypt write. A regular file is written
// under a temporary name in its directory and renamed over the target only
// by commit, after the whole stream succeeded: a failed decrypt leaves no
// plaintext behind, and an existing file stays as it was. As cp and curl
// -o do, it leaves the data to the page cache unless asked to sync (-sync):
// a sync holds the stream to the disk's speed, well below the network's
// on the hosts cipherd runs on (docs/BENCHMARKS.md, the clients against
// curl). Standard output
// and other non-regular targets (a pipe, /dev/null) cannot be taken back;
// what they received before a failure must be discarded.
type output struct {
	w        io.Writer
	f        *os.File // the temporary file, or nil
	tmp      string
	path     string
	sync     bool  // commit syncs the file and its directory
	n        int64 // bytes written
	reserved bool  // the temporary file was allocated ahead (reserve)
}

// tempPrefix names an output's temporary file; only a process killed
// outright (SIGKILL, a crash) leaves one behind.
func tempPrefix(path string) string { return "." + filepath.Base(path) + ".cipherd-" }

// createOutput opens path for writing ("-": stdout); with sync, commit
// writes it to stable storage.
func createOutput(path string, stdout io.Writer, sync bool) (*output, error) {
	if path == "-" {
		return &output{w: stdout}, nil
	}
	mode := os.FileMode(0o600)
	switch fi, err := os.Stat(path); {
	case err == nil && fi.IsDir():
		return nil, fmt.Errorf("%s is a directory", path)
	case err == nil && !fi.Mode().IsRegular():
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		return &output{w: f, f: f, path: path}, nil
	case err == nil:
		mode = fi.Mode().Perm() // replacing a file keeps its permissions
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	f, err := os.CreateTemp(filepath.Dir(path), tempPrefix(path)+"*")
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &output{w: f, f: f, tmp: f.Name(), path: path, sync: sync}, nil
}

func (o *output) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	o.n += int64(n)
	return n, err
}

// reserve allocates up to n bytes of the temporary file before anything
// is written, where the file system can (fallocate); commit cuts what was
// not written. Writing 1 GiB into allocated room cost 0.39–0.43 s of
// system time against 0.52–1.19 s into a new file (dd bs=1M, ext4), and
// the local seal of a file writes its output on one goroutine
// (scripts/localbench.sh OUT=file). It is only a hint: where the room
// cannot be had, the output is written as it comes.
func (o *output) reserve(n int64) {
	if o.tmp == "" || n <= 0 || o.n != 0 {
		return
	}
	o.reserved = allocate(o.f, n) == nil
}

// commit makes the output final: the temporary file renamed over the
// target, with sync after it and its directory were synced.
func (o *output) commit() error {
	if o.f == nil {
		return nil
	}
	if o.tmp == "" {
		return o.f.Close()
	}
	var err error
	if o.reserved {
		err = o.f.Truncate(o.n)
	}
	if o.sync && err == nil {
		err = o.f.Sync()
	}
	if cerr := o.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(o.tmp, o.path)
	}
	if err != nil {
		os.Remove(o.tmp)
		return err
	}
	o.tmp = "" // in place
	if !o.sync {
		return nil
	}
	return atomicfile.SyncDir(filepath.Dir(o.path))
}

// abort removes the temporary file; the target is untouched.
func (o *output) abort() {
	if o.f == nil {
		return
	}
	o.f.Close()
	if o.tmp != "" {
		os.Remove(o.tmp)
	}
}

// knownLen is an input of known size: its Len tells the client how much is
// left to send.
type knownLen struct {
	r    io.Reader
	left int64
}

func (k *knownLen) Read(p []byte) (int, error) {
	n, err := k.r.Read(p)
	k.left -= int64(n)
	return n, err
}

func (k *knownLen) Len() int { return int(max(k.left, 0)) }
