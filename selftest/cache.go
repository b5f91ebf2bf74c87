package selftest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/cipherd/cipherd/internal/atomicfile"
	"github.com/cipherd/cipherd/internal/buildinfo"
	"github.com/cipherd/cipherd/kernels"
)

// cacheKey identifies the conditions a profile was measured under. A profile is
// reused only when every field matches: the same processor and features in
// use, the same binary, the same GOMAXPROCS and the same implementations.
type cacheKey struct {
	CPU        string   `json:"cpu"`
	BuildID    string   `json:"build_id"`
	GOMAXPROCS int      `json:"gomaxprocs"`
	Targets    []string `json:"targets"`
	// Format changes when the profile's sizes or cells change, so that an
	// older binary's cache is never read as this one's.
	Format int `json:"format"`
}

// profileFormat is the cache's current Format: trials kept per cell, and
// openssl's sizes up to 16 KiB for the sealed format's AEADs.
const profileFormat = 2

type cacheEntry struct {
	Key      cacheKey      `json:"key"`
	Measured time.Time     `json:"measured"`
	Duration time.Duration `json:"duration_ns"`
	Profile  []ProfileCell `json:"profile"`
}

var errCacheMiss = errors.New("selftest: no cached profile")

func newCacheKey(h HostReport, targets []*kernels.Implementation) cacheKey {
	k := cacheKey{
		CPU: fmt.Sprintf("%s|%s|%d|%d|%d|%s", h.Vendor, h.Brand, h.Family, h.Model, h.Stepping,
			strings.Join(h.Features, ",")),
		BuildID:    buildinfo.Get().BuildID,
		GOMAXPROCS: h.GOMAXPROCS,
		Format:     profileFormat,
	}
	for _, im := range targets {
		k.Targets = append(k.Targets, im.String())
	}
	return k
}

// file returns the cache file's name for the key.
func (k cacheKey) file(dir string) string {
	b, _ := json.Marshal(k)
	sum := sha256.Sum256(b)
	return filepath.Join(dir, "speed-"+hex.EncodeToString(sum[:8])+".json")
}

func loadProfile(dir string, key cacheKey) (*cacheEntry, error) {
	if key.BuildID == "" {
		return nil, errCacheMiss // an unidentified binary never trusts a cache
	}
	b, err := os.ReadFile(key.file(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errCacheMiss
	}
	if err != nil {
		return nil, err
	}
	var e cacheEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("selftest: speed cache %s: %w", key.file(dir), err)
	}
	if !reflect.DeepEqual(e.Key, key) || len(e.Profile) == 0 {
		return nil, errCacheMiss
	}
	return &e, nil
}

// storeProfile writes the entry atomically (internal/atomicfile).
func storeProfile(dir string, e cacheEntry) error {
	if e.Key.BuildID == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(e.Key.file(dir), b, ".speed-")
}
