package cryptosvc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

// usageClock is a settable clock for the times flushes stamp.
type usageClock struct{ t time.Time }

func (c *usageClock) now() time.Time { return c.t }

// usageOps runs a known number of operations of every kind on key "k" of
// s, which has one version, then rotates it and rewraps a stream to
// version 2, and returns the counts they must leave.
func usageOps(t *testing.T, s *Service) []VersionUsage {
	t.Helper()
	ctx := context.Background()
	ctxt := []byte("ctx")
	var sealed [][]byte
	for i := range 3 { // one-shot
		ct, _, err := s.Seal(ctx, "k", fmt.Appendf(nil, "message %d", i), ctxt)
		if err != nil {
			t.Fatal(err)
		}
		sealed = append(sealed, ct)
	}
	for _, ct := range sealed[:2] {
		if _, _, err := s.Open(ctx, "k", ct, ctxt); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Open(ctx, "k", sealed[2], []byte("wrong")); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("open with a wrong context: %v", err) // counts nothing
	}
	z, err := s.BatchSealer(ctx, "k") // a batch of 4
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := z.AppendSeal(nil, []byte("item"), ctxt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.NewDataKey(ctx, "k", 32, ctxt, true); err != nil { // sealed +1
		t.Fatal(err)
	}
	var streams [][]byte
	for range 2 { // streams
		var buf bytes.Buffer
		w, err := s.EncryptWriter(ctx, "k", &buf, ctxt)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(bytes.Repeat([]byte("s"), 3*ChunkSize+7))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		streams = append(streams, buf.Bytes())
	}
	r, err := s.DecryptReader(ctx, "k", bytes.NewReader(streams[0]), ctxt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(r); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DecryptReaderAt(ctx, "k", bytes.NewReader(streams[1]), int64(len(streams[1])), ctxt); err != nil {
		t.Fatal(err)
	}
	dw := s.DecryptWriter(ctx, "k", io.Discard, ctxt)
	if _, err := dw.Write(streams[1]); err != nil {
		t.Fatal(err)
	}
	if err := dw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DecryptReader(ctx, "k", bytes.NewReader(streams[0]), []byte("wrong")); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("stream with a wrong context: %v", err) // counts nothing
	}
	for range 2 { // local sealing: sealing keys, and a message key
		if _, err := s.NewSealingKey(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	n, err := StreamStart(bytes.NewReader(streams[0]), int64(len(streams[0])))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.MessageKey(ctx, "k", streams[0][:n], ctxt); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RotateKey(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Rewrap(ctx, "k", streams[0], nil); err != nil { // opened under 1, sealed under 2
		t.Fatal(err)
	}
	return []VersionUsage{
		// sealed: 3 one-shot + 4 batch items + 1 data key + 2 streams;
		// opened: 2 one-shot + 3 streams + 1 message key + 1 rewrap.
		{Key: "k", Version: 1, Sealed: 10, Opened: 7, LocalSealKeys: 2},
		{Key: "k", Version: 2, Sealed: 1},
	}
}

// checkUsage compares s.KeyUsage("k") with want, LastUsed included.
func checkUsage(t *testing.T, s *Service, want []VersionUsage) {
	t.Helper()
	got, err := s.KeyUsage(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("usage %+v, want %+v", got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Key != w.Key || g.Version != w.Version || g.Sealed != w.Sealed || g.Opened != w.Opened ||
			g.LocalSealKeys != w.LocalSealKeys || !g.LastUsed.Equal(w.LastUsed) {
			t.Fatalf("usage %+v,\nwant  %+v", got, want)
		}
	}
}

// TestUsageCounts: every kind of operation counts once on the version it
// used, failures count nothing; counts not flushed yet show with the time
// they are read, and a flush stamps them with its own time.
func TestUsageCounts(t *testing.T) {
	clock := &usageClock{time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)}
	store := NewMemStore()
	s, err := New(Config{Keystore: store, Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateKey(context.Background(), "k", KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	checkUsage(t, s, []VersionUsage{{Key: "k", Version: 1}})
	want := usageOps(t, s)
	for i := range want {
		want[i].LastUsed = clock.t // pending: as of the read
	}
	checkUsage(t, s, want)
	if stored, _ := store.Usage(context.Background(), "k"); len(stored) != 0 {
		t.Fatalf("counted in the store before a flush: %+v", stored)
	}

	flushed := clock.t.Add(time.Second)
	clock.t = flushed
	if err := s.FlushUsage(context.Background()); err != nil {
		t.Fatal(err)
	}
	clock.t = flushed.Add(time.Hour) // nothing pending: the flush's time stays
	for i := range want {
		want[i].LastUsed = flushed
	}
	checkUsage(t, s, want)
	assertStored(t, store, want)
	if err := s.FlushUsage(context.Background()); err != nil { // nothing to add
		t.Fatal(err)
	}
	assertStored(t, store, want)
}

// assertStored checks what a UsageStore holds of key "k".
func assertStored(t *testing.T, us UsageStore, want []VersionUsage) {
	t.Helper()
	got, err := us.Usage(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stored %+v,\nwant   %+v", got, want)
	}
}

// failingUsage is a MemStore whose AddUsage fails while fail is set.
type failingUsage struct {
	*MemStore
	fail bool
}

func (f *failingUsage) AddUsage(ctx context.Context, d []VersionUsage) error {
	if f.fail {
		return ErrUnavailable
	}
	return f.MemStore.AddUsage(ctx, d)
}

// TestUsageFlushFailureLosesNothing: counts a failed flush could not write
// are written by the next one, with what was counted meanwhile.
func TestUsageFlushFailureLosesNothing(t *testing.T) {
	store := &failingUsage{MemStore: NewMemStore(), fail: true}
	clock := &usageClock{time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)}
	s, err := New(Config{Keystore: store, Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.CreateKey(ctx, "k", KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	seal := func(n int) {
		for range n {
			if _, _, err := s.Seal(ctx, "k", []byte("x"), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	seal(5)
	if err := s.FlushUsage(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("flush into a failing store: %v", err)
	}
	seal(2)
	store.fail = false
	if err := s.FlushUsage(ctx); err != nil {
		t.Fatal(err)
	}
	assertStored(t, store, []VersionUsage{{Key: "k", Version: 1, Sealed: 7, LastUsed: clock.t}})
}

// TestUsageFileStoreRestart: the file keystore keeps the totals in
// usage.json across a restart, and later flushes add to them.
func TestUsageFileStoreRestart(t *testing.T) {
	dir := t.TempDir()
	clock := &usageClock{time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)}
	open := func() (*FileStore, *Service) {
		fs, err := OpenFileStore(dir, FileStoreConfig{DevRootKey: true})
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(Config{Keystore: fs, Now: clock.now})
		if err != nil {
			t.Fatal(err)
		}
		return fs, s
	}
	fs, s := open()
	if _, err := s.CreateKey(context.Background(), "k", KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	want := usageOps(t, s)
	if err := s.FlushUsage(context.Background()); err != nil {
		t.Fatal(err)
	}
	fs.Close()

	clock.t = clock.t.Add(time.Minute)
	fs, s = open()
	defer fs.Close()
	for i := range want {
		want[i].LastUsed = clock.t.Add(-time.Minute)
	}
	checkUsage(t, s, want)
	if _, _, err := s.Seal(context.Background(), "k", []byte("after the restart"), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.FlushUsage(context.Background()); err != nil {
		t.Fatal(err)
	}
	want[1].Sealed++
	want[1].LastUsed = clock.t
	checkUsage(t, s, want)
}
