package cryptosvc

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Usage counts (usage.go) in the file keystore and in MemStore. The file
// keystore keeps the totals of every key version in dir/usage.json,
// rewritten whole and atomically by each flush, never in the key files: a
// flush every few seconds must not rewrite sealed records, and a crash
// leaves the totals of the last flush or the one before, whole. The file
// holds key names, version numbers, counts and times, nothing secret; like
// tokens.json it is protected by the directory's permissions.
//
//	{"v":1,"usage":[{"key":"orders","version":1,"sealed":12,"opened":7,
//	  "local_seal_keys":0,"last_used":"<RFC 3339>"}]}
//
// Entries are sorted by key and version; last_used is absent for a version
// never used. Unknown versions, unknown fields and trailing bytes are
// rejected.

const ksUsageFile = "usage.json"

var (
	_ UsageStore = (*FileStore)(nil)
	_ UsageStore = (*MemStore)(nil)
)

type ksUsageDoc struct {
	V     int             `json:"v"`
	Usage []ksUsageRecord `json:"usage"`
}

type ksUsageRecord struct {
	Key           string     `json:"key"`
	Version       uint32     `json:"version"`
	Sealed        uint64     `json:"sealed"`
	Opened        uint64     `json:"opened"`
	LocalSealKeys uint64     `json:"local_seal_keys"`
	LastUsed      *time.Time `json:"last_used,omitempty"`
}

// AddUsage adds the deltas of the keys and versions the store holds.
func (s *MemStore) AddUsage(ctx context.Context, deltas []VersionUsage) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	s.usage.addIf(deltas, s.holds)
	return nil
}

// Usage returns the counts of key name's versions.
func (s *MemStore) Usage(ctx context.Context, name string) ([]VersionUsage, error) {
	return s.usage.Usage(ctx, name)
}

// holds reports, under mu, whether the store has d's key and version.
func (s *keySet) holds(d *VersionUsage) bool {
	k := s.keys[d.Key]
	return k != nil && k.Version(d.Version) != nil
}

// AddUsage writes usage.json with the deltas of the keys and versions the
// store holds added to the totals, then makes them the totals in memory.
// The counts of keys the store no longer holds leave the file.
func (s *FileStore) AddUsage(ctx context.Context, deltas []VersionUsage) error {
	s.umu.Lock()
	defer s.umu.Unlock()
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	next := make(map[versionRef]VersionUsage, len(s.usageTotals)+len(deltas))
	for ref, u := range s.usageTotals {
		if s.holds(&u) {
			next[ref] = u
		}
	}
	for i := range deltas {
		d := &deltas[i]
		if !s.holds(d) {
			continue
		}
		ref := versionRef{d.Key, d.Version}
		u := next[ref]
		u.Key, u.Version = d.Key, d.Version
		u.add(d)
		next[ref] = u
	}
	s.mu.RUnlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.ksWriteUsage(next); err != nil {
		return err
	}
	s.usageTotals = next
	return nil
}

// Usage returns the totals of key name's versions.
func (s *FileStore) Usage(_ context.Context, name string) ([]VersionUsage, error) {
	s.umu.Lock()
	defer s.umu.Unlock()
	var out []VersionUsage
	for ref, u := range s.usageTotals {
		if ref.name == name {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b VersionUsage) int { return cmp.Compare(a.Version, b.Version) })
	return out, nil
}

// ksForgetUsage drops the totals of key name, a key made anew under the
// name of one deleted before, from memory and the file. A failed write
// is logged: the next flush writes the file without them.
func (s *FileStore) ksForgetUsage(name string) {
	s.umu.Lock()
	defer s.umu.Unlock()
	next := maps.Clone(s.usageTotals)
	maps.DeleteFunc(next, func(ref versionRef, _ VersionUsage) bool { return ref.name == name })
	if len(next) == len(s.usageTotals) {
		return
	}
	s.usageTotals = next
	if err := s.ksWriteUsage(next); err != nil {
		s.log.Warn("keystore: the usage counts of a deleted key are still in the usage file", zap.String("key", name), zap.Error(err))
	}
}

// ksWriteUsage replaces usage.json with totals. Callers hold umu.
func (s *FileStore) ksWriteUsage(totals map[versionRef]VersionUsage) error {
	doc := ksUsageDoc{V: 1, Usage: make([]ksUsageRecord, 0, len(totals))}
	for _, u := range totals {
		r := ksUsageRecord{Key: u.Key, Version: u.Version, Sealed: u.Sealed, Opened: u.Opened, LocalSealKeys: u.LocalSealKeys}
		if !u.LastUsed.IsZero() {
			t := u.LastUsed.UTC()
			r.LastUsed = &t
		}
		doc.Usage = append(doc.Usage, r)
	}
	slices.SortFunc(doc.Usage, func(a, b ksUsageRecord) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), cmp.Compare(a.Version, b.Version))
	})
	b, err := json.Marshal(&doc)
	if err != nil {
		return err
	}
	if err := ksWriteFileAtomic(s.dir, ksUsageFile, append(b, '\n')); err != nil {
		return fmt.Errorf("cryptosvc: keystore: writing the usage counts: %w", err)
	}
	return nil
}

// ksLoadUsage reads usage.json, if there is one, into memory.
func (s *FileStore) ksLoadUsage() error {
	path := filepath.Join(s.dir, ksUsageFile)
	s.usageTotals = map[versionRef]VersionUsage{}
	data, err := ksReadSmall(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cryptosvc: keystore: %w", err)
	}
	var doc ksUsageDoc
	if err := ksUnmarshalStrict(data, &doc, ErrMalformed); err != nil {
		return fmt.Errorf("cryptosvc: keystore file %s: %w", path, err)
	}
	if doc.V != 1 {
		return fmt.Errorf("cryptosvc: keystore file %s: %w: version %d", path, ErrUnsupported, doc.V)
	}
	for _, r := range doc.Usage {
		ref := versionRef{r.Key, r.Version}
		if ValidateKeyName(r.Key) != nil || r.Version == 0 {
			return fmt.Errorf("cryptosvc: keystore file %s: %w: an entry without a valid key name and version", path, ErrMalformed)
		}
		if _, dup := s.usageTotals[ref]; dup {
			return fmt.Errorf("cryptosvc: keystore file %s: %w: key %s version %d twice", path, ErrMalformed, r.Key, r.Version)
		}
		u := VersionUsage{Key: r.Key, Version: r.Version, Sealed: r.Sealed, Opened: r.Opened, LocalSealKeys: r.LocalSealKeys}
		if r.LastUsed != nil {
			u.LastUsed = *r.LastUsed
		}
		s.usageTotals[ref] = u
	}
	return nil
}
