package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// An output that reserved more room than it was written keeps only what
// was written, and a reservation is made before the first write only.
func TestOutputReserve(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out")
	o, err := createOutput(path, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	o.reserve(1 << 20)
	if runtime.GOOS == "linux" {
		if !o.reserved {
			t.Fatal("no room reserved in a new file on Linux")
		}
		if fi, _ := o.f.Stat(); fi.Size() != 1<<20 {
			t.Fatalf("a reserved file of %d bytes, want %d", fi.Size(), 1<<20)
		}
	}
	data := bytes.Repeat([]byte("sealed "), 1000)
	o.Write(data)
	o.reserve(1 << 30) // after a write: nothing
	if err := o.commit(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the committed output: %d bytes, %v; want the %d written", len(got), err, len(data))
	}
	// Standard output, or another target that is not ours, reserves nothing.
	var buf bytes.Buffer
	so, _ := createOutput("-", &buf, false)
	so.reserve(100)
	if so.reserved {
		t.Error("standard output reserved room")
	}
}
