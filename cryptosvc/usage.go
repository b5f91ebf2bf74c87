package cryptosvc

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Usage per key version: how many messages each version sealed and opened,
// and how many sealing keys it handed out, so that an operator can see that
// a version has opened nothing for a month before retiring it.
//
// The data path counts in memory only: the counters of a version hang off
// its derived keys (versionKeys.use), which every operation already holds,
// so counting costs one atomic add and no lookup. FlushUsage takes what was
// counted since the last flush and adds it to the keystore's backend in one
// write (UsageStore.AddUsage); a failed write keeps the counts for the next
// flush. Each process adds only its own counts, so the backend's sums are
// those of every process that shares it. The server flushes every
// usage_flush_interval and once more at shutdown.
//
// What counts, once the operation succeeded:
//
//   - sealed: a one-shot message (Seal, a batch item, a data key), a
//     stream when its header is made (EncryptWriter, EncryptReader), and a
//     rewrap's new message under the latest version;
//   - opened: a one-shot message once it authenticated (Open), a stream or
//     range once its header and commitment checked out (DecryptReader,
//     DecryptReaderAt, DecryptWriter, DecryptRange), a message key handed
//     out to open a message locally (MessageKey), and a rewrap's message
//     under the version it left;
//   - local seal keys: a sealing key handed out (NewSealingKey); what a
//     client seals with it locally is not seen by the service.
//
// last used is the time of the flush that carried the counts (or, for
// counts not flushed yet, the time they are read): it is within one flush
// interval after the last use.

// VersionUsage is the use of one key version: counts since the key was
// created, or, as a delta (UsageStore.AddUsage), since the last flush.
type VersionUsage struct {
	Key           string
	Version       uint32
	Sealed        uint64
	Opened        uint64
	LocalSealKeys uint64
	// LastUsed is when a use was last counted (the flush that carried
	// it); zero when never.
	LastUsed time.Time
}

func (u *VersionUsage) zero() bool { return u.Sealed == 0 && u.Opened == 0 && u.LocalSealKeys == 0 }

// add adds d's counts to u and keeps the later LastUsed.
func (u *VersionUsage) add(d *VersionUsage) {
	u.Sealed += d.Sealed
	u.Opened += d.Opened
	u.LocalSealKeys += d.LocalSealKeys
	if d.LastUsed.After(u.LastUsed) {
		u.LastUsed = d.LastUsed
	}
}

// A UsageStore is a Keystore that keeps usage counts per key version in its
// backend: FileStore (a file beside the keys), MemStore and the PostgreSQL
// store (a table every replica adds to). Stores without it (a read-only
// keyring) leave the counts to the Service's memory, where they last as
// long as the process.
type UsageStore interface {
	// AddUsage adds the deltas to the stored counts, all of them or none,
	// and keeps the later LastUsed of each version. Deltas of keys or
	// versions the store does not hold are dropped.
	AddUsage(ctx context.Context, deltas []VersionUsage) error
	// Usage returns the stored counts of key name's versions, by version;
	// versions never counted may be absent.
	Usage(ctx context.Context, name string) ([]VersionUsage, error)
}

// usageCounts are one version's counts since the last flush.
type usageCounts struct {
	sealed, opened, localKeys atomic.Uint64
}

// usageTable holds the counts of every version this process used.
type usageTable struct {
	mu sync.Mutex // guards m
	m  map[versionRef]*usageCounts
	// flush is held by a flush from the moment it takes the counts until
	// its write ends, and by KeyUsage while it reads: counts are then in
	// memory or in the store, never in flight between the two.
	flush sync.Mutex
	// local keeps the flushed counts of a store that is no UsageStore.
	local memUsage
}

// counts returns the counters of ref, made on first use.
func (t *usageTable) counts(ref versionRef) *usageCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[versionRef]*usageCounts)
	}
	c := t.m[ref]
	if c == nil {
		c = new(usageCounts)
		t.m[ref] = c
	}
	return c
}

// take empties every counter and returns what they held, stamped at, and
// the versions that counted nothing.
func (t *usageTable) take(at time.Time) (deltas []VersionUsage, idle []versionRef) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for ref, c := range t.m {
		d := VersionUsage{Key: ref.name, Version: ref.version, Sealed: c.sealed.Swap(0), Opened: c.opened.Swap(0), LocalSealKeys: c.localKeys.Swap(0), LastUsed: at}
		if d.zero() {
			idle = append(idle, ref)
			continue
		}
		deltas = append(deltas, d)
	}
	// One order for every process, so that writers sharing a database
	// lock the same rows in the same order.
	slices.SortFunc(deltas, func(a, b VersionUsage) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return cmp.Compare(a.Version, b.Version)
	})
	return deltas, idle
}

// giveBack returns deltas that could not be written to their counters.
func (t *usageTable) giveBack(deltas []VersionUsage) {
	for i := range deltas {
		d := &deltas[i]
		c := t.counts(versionRef{d.Key, d.Version})
		c.sealed.Add(d.Sealed)
		c.opened.Add(d.Opened)
		c.localKeys.Add(d.LocalSealKeys)
	}
}

// pending returns what name's versions counted since the last flush.
func (t *usageTable) pending(name string) map[uint32]VersionUsage {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[uint32]VersionUsage{}
	for ref, c := range t.m {
		if ref.name == name {
			out[ref.version] = VersionUsage{Key: name, Version: ref.version, Sealed: c.sealed.Load(), Opened: c.opened.Load(), LocalSealKeys: c.localKeys.Load()}
		}
	}
	return out
}

// usageStore returns where the counts are flushed to.
func (s *Service) usageStore() UsageStore {
	if us, ok := s.store.(UsageStore); ok {
		return us
	}
	return &s.usage.local
}

// FlushUsage adds the usage counted since the last flush to the keystore's
// backend (UsageStore) in one write. If the write fails, the counts stay
// for the next flush and the error is returned. Call it periodically and
// once before closing the keystore; the server does both. A store that is
// no UsageStore keeps the counts in this Service's memory.
func (s *Service) FlushUsage(ctx context.Context) error {
	s.usage.flush.Lock()
	defer s.usage.flush.Unlock()
	deltas, idle := s.usage.take(s.now().UTC())
	if len(deltas) > 0 {
		if err := s.usageStore().AddUsage(ctx, deltas); err != nil {
			s.usage.giveBack(deltas)
			return err
		}
	}
	s.forgetGone(ctx, idle)
	return nil
}

// forgetGone drops the counters, and the derived keys, of idle versions
// whose key the store no longer holds, so that the table does not grow
// with keys deleted over the life of the process.
func (s *Service) forgetGone(ctx context.Context, idle []versionRef) {
	var gone []versionRef
	for _, ref := range idle {
		k, err := s.store.Get(ctx, ref.name)
		if errors.Is(err, ErrKeyNotFound) || err == nil && k.Version(ref.version) == nil {
			gone = append(gone, ref)
		}
	}
	if len(gone) == 0 {
		return
	}
	s.cacheMu.Lock()
	for _, ref := range gone {
		delete(s.cache, ref)
	}
	s.cacheMu.Unlock()
	s.usage.mu.Lock()
	for _, ref := range gone {
		delete(s.usage.m, ref)
	}
	s.usage.mu.Unlock()
}

// KeyUsage returns the use of each version of key name, by version: the
// counts in the keystore's backend (every process's flushed counts, with
// a shared store) plus this process's not flushed yet. A version never
// used has zero counts and no LastUsed. With a shared store whose backend
// is unreachable it fails with ErrUnavailable at once.
func (s *Service) KeyUsage(ctx context.Context, name string) ([]VersionUsage, error) {
	k, err := s.key(ctx, name)
	if err != nil {
		return nil, err
	}
	if h, ok := s.store.(HealthReporter); ok {
		if err := h.Health(); err != nil {
			return nil, err
		}
	}
	s.usage.flush.Lock()
	defer s.usage.flush.Unlock()
	stored, err := s.usageStore().Usage(ctx, name)
	if err != nil {
		return nil, err
	}
	pending := s.usage.pending(name)
	now := s.now().UTC()
	out := make([]VersionUsage, len(k.Versions))
	for i, v := range k.Versions {
		u := &out[i]
		*u = VersionUsage{Key: name, Version: v.Version}
		for j := range stored {
			if stored[j].Version == v.Version {
				u.add(&stored[j])
			}
		}
		if p := pending[v.Version]; !p.zero() {
			p.LastUsed = now
			u.add(&p)
		}
	}
	return out, nil
}

// memUsage keeps usage counts in memory: MemStore's, and the Service's for
// a store that is no UsageStore.
type memUsage struct {
	mu sync.Mutex
	m  map[versionRef]VersionUsage
}

// AddUsage adds deltas, of any key.
func (m *memUsage) AddUsage(_ context.Context, deltas []VersionUsage) error {
	m.addIf(deltas, nil)
	return nil
}

// addIf adds the deltas for which keep (nil: every one) returns true.
func (m *memUsage) addIf(deltas []VersionUsage, keep func(*VersionUsage) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[versionRef]VersionUsage)
	}
	for i := range deltas {
		d := &deltas[i]
		if keep != nil && !keep(d) {
			continue
		}
		ref := versionRef{d.Key, d.Version}
		u := m.m[ref]
		u.Key, u.Version = d.Key, d.Version
		u.add(d)
		m.m[ref] = u
	}
}

// Usage returns name's counts, by version.
func (m *memUsage) Usage(_ context.Context, name string) ([]VersionUsage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []VersionUsage
	for ref, u := range m.m {
		if ref.name == name {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b VersionUsage) int { return cmp.Compare(a.Version, b.Version) })
	return out, nil
}

// forget drops name's counts.
func (m *memUsage) forget(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for ref := range m.m {
		if ref.name == name {
			delete(m.m, ref)
		}
	}
}
