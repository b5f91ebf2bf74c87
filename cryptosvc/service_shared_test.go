package cryptosvc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Several Services over one store stand for several replicas over one
// shared database: each has its own in-process lock, so only the store's
// revisions keep their writes from overwriting each other.

func TestRotateKeyAcrossServices(t *testing.T) {
	ctx := context.Background()
	store := NewMemStore()
	var svcs []*Service
	for range 3 {
		s, err := New(Config{Keystore: store})
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, s)
	}
	if _, err := svcs[0].CreateKey(ctx, "k", KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	const rotations = 100
	got := make(chan uint32, rotations)
	var wg sync.WaitGroup
	for i := range rotations {
		wg.Go(func() {
			k, err := svcs[i%len(svcs)].RotateKey(ctx, "k")
			if err != nil {
				t.Error(err)
				return
			}
			got <- k.Latest()
		})
	}
	wg.Wait()
	close(got)
	seen := map[uint32]bool{}
	for v := range got {
		if seen[v] {
			t.Fatalf("version %d returned twice", v)
		}
		seen[v] = true
	}
	for v := uint32(2); v <= rotations+1; v++ {
		if !seen[v] {
			t.Fatalf("no rotation made version %d", v)
		}
	}
	k, _ := store.Get(ctx, "k")
	if len(k.Versions) != rotations+1 {
		t.Fatalf("%d versions stored, want %d", len(k.Versions), rotations+1)
	}
}

func TestRotateDueAcrossServices(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	store := NewMemStore()
	var svcs []*Service
	for range 3 {
		s, _ := New(Config{Keystore: store, Now: clock})
		svcs = append(svcs, s)
	}
	svcs[0].CreateKey(ctx, "hourly", KeyConfig{RotationPeriod: Duration(time.Hour)})
	for period := range 5 {
		mu.Lock()
		now = now.Add(time.Hour)
		mu.Unlock()
		var wg sync.WaitGroup
		for _, s := range svcs {
			for range 4 {
				wg.Go(func() {
					if _, err := s.RotateDue(ctx); err != nil {
						t.Error(err)
					}
				})
			}
		}
		wg.Wait()
		k, _ := store.Get(ctx, "hourly")
		if want := period + 2; len(k.Versions) != want {
			t.Fatalf("period %d: %d versions, want %d", period+1, len(k.Versions), want)
		}
	}
}

func TestDeleteKeyRechecksConfig(t *testing.T) {
	ctx := context.Background()
	store := NewMemStore()
	s, _ := New(Config{Keystore: store})
	s.CreateKey(ctx, "k", KeyConfig{DeletionAllowed: true})
	// Another replica forbids deletion after this one read the key: the
	// store refuses the delete made from the stale read.
	stale, _ := store.Get(ctx, "k")
	if _, err := s.ConfigureKey(ctx, "k", KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, "k", stale.Revision); err == nil {
		t.Fatal("a delete from a stale read applied")
	}
	if err := s.DeleteKey(ctx, "k"); err == nil {
		t.Fatal("DeleteKey ignored the new configuration")
	}
}

// laggingStore is a replica's view of a shared store that has not heard
// of the keys another replica created: Get misses them, Refresh (the read
// through to the backing store) finds them.
type laggingStore struct {
	Keystore
	mu    sync.Mutex
	heard map[string]bool
}

func (l *laggingStore) Get(ctx context.Context, name string) (*StoredKey, error) {
	l.mu.Lock()
	heard := l.heard[name]
	l.mu.Unlock()
	if !heard {
		return nil, ErrKeyNotFound
	}
	return l.Keystore.Get(ctx, name)
}

func (l *laggingStore) Refresh(ctx context.Context, name string, enough func(*StoredKey) bool) (*StoredKey, error) {
	k, err := l.Keystore.Refresh(ctx, name, enough)
	if err == nil {
		l.mu.Lock()
		l.heard[name] = true
		l.mu.Unlock()
	}
	return k, err
}

// A key created through one replica serves through another before that
// one has heard of it: every operation that names a key reads it through
// on a miss.
func TestKeyCreatedElsewhereReadThrough(t *testing.T) {
	ctx := context.Background()
	shared := NewMemStore()
	first, _ := New(Config{Keystore: shared})
	for name, use := range map[string]func(*Service, string) error{
		"seal":     func(s *Service, n string) error { _, _, err := s.Seal(ctx, n, []byte("x"), nil); return err },
		"describe": func(s *Service, n string) error { _, err := s.DescribeKey(ctx, n); return err },
		"rotate":   func(s *Service, n string) error { _, err := s.RotateKey(ctx, n); return err },
		"config": func(s *Service, n string) error {
			_, err := s.ConfigureKey(ctx, n, KeyConfig{DeletionAllowed: true})
			return err
		},
		"datakey": func(s *Service, n string) error { _, err := s.NewDataKey(ctx, n, 32, nil, false); return err },
	} {
		if _, err := first.CreateKey(ctx, name, KeyConfig{DeletionAllowed: true}); err != nil {
			t.Fatal(err)
		}
		other, _ := New(Config{Keystore: &laggingStore{Keystore: shared, heard: map[string]bool{}}})
		if err := use(other, name); err != nil {
			t.Errorf("%s on a replica that has not heard of the key: %v", name, err)
		}
	}
	first.CreateKey(ctx, "doomed", KeyConfig{DeletionAllowed: true})
	other, _ := New(Config{Keystore: &laggingStore{Keystore: shared, heard: map[string]bool{}}})
	if err := other.DeleteKey(ctx, "doomed"); err != nil {
		t.Errorf("delete on a replica that has not heard of the key: %v", err)
	}
	if _, _, err := other.Seal(ctx, "nosuch", nil, nil); !errors.Is(err, ErrKeyNotFound) {
		t.Errorf("seal under a key nobody made = %v, want ErrKeyNotFound", err)
	}
}

// failedReadStore is a replica's memory whose read through fails, the
// database gone as it started, while memory gains the key from elsewhere
// (with gains): a read that was already running when the caller missed, a
// notification. Until then Get returns stale (nil: no key).
type failedReadStore struct {
	Keystore // what memory holds once it gained the key
	stale    *StoredKey
	gains    bool

	mu     sync.Mutex
	gained bool
}

func (f *failedReadStore) Get(ctx context.Context, name string) (*StoredKey, error) {
	f.mu.Lock()
	gained := f.gained
	f.mu.Unlock()
	switch {
	case gained:
		return f.Keystore.Get(ctx, name)
	case f.stale == nil:
		return nil, ErrKeyNotFound
	}
	return f.stale, nil
}

func (f *failedReadStore) Refresh(ctx context.Context, name string, _ func(*StoredKey) bool) (*StoredKey, error) {
	f.mu.Lock()
	f.gained = f.gains
	f.mu.Unlock()
	return nil, fmt.Errorf("%w: the database went down", ErrUnavailable)
}

// A read through that fails does not fail the request if memory has, by
// then, the version (or the key) the request needs; if it has not, the
// request fails with ErrUnavailable, never as if the version did not exist.
func TestReadThroughFailedAfterMemoryGained(t *testing.T) {
	ctx := context.Background()
	shared := NewMemStore()
	first, _ := New(Config{Keystore: shared})
	if _, err := first.CreateKey(ctx, "k", KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	v1, _ := shared.Get(ctx, "k")
	if _, err := first.RotateKey(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	ct, info, err := first.Seal(ctx, "k", []byte("under 2"), nil)
	if err != nil || info.Version != 2 {
		t.Fatalf("seal: version %d, %v", info.Version, err)
	}
	check := func(what string, gains bool, err error) {
		t.Helper()
		switch {
		case gains && err != nil:
			t.Errorf("%s, memory gained the key as the read failed: %v", what, err)
		case !gains && !errors.Is(err, ErrUnavailable):
			t.Errorf("%s, memory still without the key as the read failed = %v, want ErrUnavailable", what, err)
		}
	}
	for _, gains := range []bool{true, false} {
		s, _ := New(Config{Keystore: &failedReadStore{Keystore: shared, stale: v1, gains: gains}})
		pt, _, err := s.Open(ctx, "k", ct, nil)
		if err == nil && string(pt) != "under 2" {
			t.Errorf("opened to %q", pt)
		}
		check("open under a version memory lacked", gains, err)

		s, _ = New(Config{Keystore: &failedReadStore{Keystore: shared, gains: gains}})
		_, _, err = s.Seal(ctx, "k", []byte("x"), nil)
		check("seal under a key memory lacked", gains, err)
	}
}

// TestReadThroughLogPaced: headers naming a version no replica has each
// read the keystore through (a replica that missed a rotation could be
// asked for it), but the line that says so is paced: readLogBurst at
// once, then readLogRate a second, the next one counting those left out.
func TestReadThroughLogPaced(t *testing.T) {
	ctx := context.Background()
	core, logs := observer.New(zapcore.InfoLevel)
	now := time.Now() // a clock that stands still, however slow the machine
	s, err := New(Config{Keystore: NewMemStore(), Logger: zap.New(core), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateKey(ctx, "k", KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	ct, _, err := s.Seal(ctx, "k", []byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h, n, err := ParseHeader(ct)
	if err != nil {
		t.Fatal(err)
	}
	h.KeyVersion = 7
	hdr, err := h.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	forged := append(hdr, ct[n:]...)
	const tries = 200
	for range tries {
		if _, _, err := s.Open(ctx, "k", forged, nil); !errors.Is(err, ErrKeyNotFound) {
			t.Fatalf("a version nobody made: %v, want ErrKeyNotFound", err)
		}
	}
	lines := logs.FilterMessageSnippet("not in memory").All()
	if len(lines) != readLogBurst {
		t.Fatalf("%d read-through lines for %d opens, want %d", len(lines), tries, readLogBurst)
	}
	now = now.Add(time.Second / readLogRate) // room for one more
	s.Open(ctx, "k", forged, nil)
	last := logs.FilterMessageSnippet("not in memory").All()
	if got := last[len(last)-1].ContextMap()["unlogged_before"]; got != int64(tries-len(lines)) {
		t.Errorf("the next line counts %v left out, want %d", got, tries-len(lines))
	}
}
