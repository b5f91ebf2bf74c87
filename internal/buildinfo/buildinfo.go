// Package buildinfo reports what binary is running: its version, the Go
// toolchain and build settings, and the Go build ID that identifies it exactly.
package buildinfo

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// Version is set at link time: -ldflags "-X github.com/cipherd/cipherd/internal/buildinfo.Version=v1.2.3".
var Version = "devel"

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`           // GOOS/GOARCH
	Revision  string `json:"revision,omitempty"` // VCS revision, when the build recorded it
	Time      string `json:"time,omitempty"`     // VCS commit time, when recorded
	Modified  bool   `json:"modified,omitempty"`
	Tags      string `json:"tags,omitempty"`     // build tags, e.g. "purego"
	GOAMD64   string `json:"goamd64,omitempty"`  // microarchitecture level on amd64
	BuildID   string `json:"build_id,omitempty"` // Go build ID, or a hash of the executable
}

// Get returns the running binary's Info. The build ID is read once.
func Get() Info {
	in := Info{
		Version:   Version,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
		BuildID:   buildID(),
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Revision = s.Value
			case "vcs.time":
				in.Time = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			case "-tags":
				in.Tags = s.Value
			case "GOAMD64":
				in.GOAMD64 = s.Value
			}
		}
		if in.Version == "devel" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
	}
	return in
}

var buildID = sync.OnceValue(func() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if id := elfGoBuildID(exe); id != "" {
		return id
	}
	f, err := os.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
})

// elfGoBuildID returns the Go build ID from an ELF executable's
// .note.go.buildid section: a note with name "Go" and type 4.
func elfGoBuildID(path string) string {
	f, err := elf.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := f.Section(".note.go.buildid")
	if s == nil {
		return ""
	}
	b, err := s.Data()
	if err != nil || len(b) < 16 {
		return ""
	}
	bo := f.ByteOrder
	namesz, descsz, typ := bo.Uint32(b[0:]), bo.Uint32(b[4:]), bo.Uint32(b[8:])
	nameEnd := 12 + (namesz+3)&^3
	if typ != 4 || namesz != 4 || string(b[12:14]) != "Go" || uint32(len(b)) < nameEnd+descsz {
		return ""
	}
	return strings.TrimRight(string(b[nameEnd:nameEnd+descsz]), "\x00")
}
