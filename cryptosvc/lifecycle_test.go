package cryptosvc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"
)

// testClock is a clock tests move by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock {
	return &testClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *testClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// sealStream seals pt as a stream (envelope mode) under name.
func sealStream(t *testing.T, s *Service, name string, pt []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := s.EncryptWriter(context.Background(), name, &buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(pt); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// openStream opens a stream sealed under name.
func openStream(s *Service, name string, ct []byte) ([]byte, error) {
	r, err := s.DecryptReader(context.Background(), name, bytes.NewReader(ct), nil)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// A key pending deletion is refused to every operation but a description,
// until its deletion is cancelled (and it serves again, every version
// intact) or done.
func TestScheduledDeletion(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	s, err := New(Config{Keystore: NewMemStore(), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateKey(ctx, "keep", KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ScheduleKeyDeletion(ctx, "keep", time.Hour); !errors.Is(err, ErrDeletionNotAllowed) {
		t.Fatalf("schedule without deletion_allowed: %v", err)
	}
	if _, err := s.CreateKey(ctx, "k", KeyConfig{DeletionAllowed: true}); err != nil {
		t.Fatal(err)
	}
	v1, _, err := s.Seal(ctx, "k", []byte("one"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RotateKey(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	v2 := sealStream(t, s, "k", []byte("two"))

	if _, err := s.ScheduleKeyDeletion(ctx, "k", 0); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("schedule with no wait: %v", err)
	}
	const wait = 7 * 24 * time.Hour
	k, err := s.ScheduleKeyDeletion(ctx, "k", wait)
	if err != nil {
		t.Fatal(err)
	}
	deleteAt := clock.Now().Add(wait)
	if k.Deletion == nil || !k.Deletion.Scheduled.Equal(clock.Now()) || !k.Deletion.DeleteAt.Equal(deleteAt) {
		t.Fatalf("scheduled: %+v", k.Deletion)
	}

	pending := func(what string, err error) {
		t.Helper()
		pe, ok := errors.AsType[*PendingDeletionError](err)
		if !ok || !errors.Is(err, ErrKeyPendingDeletion) || !pe.DeleteAt.Equal(deleteAt) {
			t.Errorf("%s while pending: %v, want ErrKeyPendingDeletion at %v", what, err, deleteAt)
		}
	}
	_, _, err = s.Seal(ctx, "k", []byte("x"), nil)
	pending("Seal", err)
	_, _, err = s.Open(ctx, "k", v1, nil)
	pending("Open", err)
	_, err = openStream(s, "k", v2)
	pending("DecryptReader", err)
	_, err = s.EncryptWriter(ctx, "k", io.Discard, nil)
	pending("EncryptWriter", err)
	_, _, err = s.Rewrap(ctx, "k", v2, nil)
	pending("Rewrap", err)
	_, err = s.NewDataKey(ctx, "k", 32, nil, true)
	pending("NewDataKey", err)
	_, err = s.NewSealingKey(ctx, "k")
	pending("NewSealingKey", err)
	_, err = s.BatchSealer(ctx, "k")
	pending("BatchSealer", err)
	_, err = s.RotateKey(ctx, "k")
	pending("RotateKey", err)
	_, err = s.ConfigureKey(ctx, "k", KeyConfig{DeletionAllowed: true})
	pending("ConfigureKey", err)
	pending("DeleteKey", s.DeleteKey(ctx, "k"))
	_, err = s.ScheduleKeyDeletion(ctx, "k", wait)
	pending("ScheduleKeyDeletion", err)
	_, err = s.DisableKeyVersion(ctx, "k", 1)
	pending("DisableKeyVersion", err)
	_, err = s.TrimKey(ctx, "k", 2)
	pending("TrimKey", err)

	if d, err := s.DescribeKey(ctx, "k"); err != nil || d.Deletion == nil || !d.Deletion.DeleteAt.Equal(deleteAt) {
		t.Fatalf("DescribeKey while pending: %+v, %v", d.Deletion, err)
	}
	if keys, err := s.ListKeys(ctx); err != nil || len(keys) != 2 || keys[0].Name != "k" || keys[0].Deletion == nil || keys[1].Deletion != nil {
		t.Fatalf("ListKeys while pending: %+v, %v", keys, err)
	}

	// Not due a second before its time.
	clock.Advance(wait - time.Second)
	if gone, err := s.DeleteDue(ctx); err != nil || len(gone) != 0 {
		t.Fatalf("DeleteDue a second early: %v, %v", gone, err)
	}

	// Cancelled, the key serves again with both versions.
	if k, err = s.CancelKeyDeletion(ctx, "k"); err != nil || k.Deletion != nil || k.Latest() != 2 {
		t.Fatalf("cancel: %+v, %v", k, err)
	}
	if pt, _, err := s.Open(ctx, "k", v1, nil); err != nil || string(pt) != "one" {
		t.Fatalf("version 1 after the cancel: %q, %v", pt, err)
	}
	if pt, err := openStream(s, "k", v2); err != nil || string(pt) != "two" {
		t.Fatalf("version 2 after the cancel: %q, %v", pt, err)
	}
	if _, err := s.CancelKeyDeletion(ctx, "k"); !errors.Is(err, ErrKeyNotPendingDeletion) {
		t.Fatalf("second cancel: %v", err)
	}
	clock.Advance(time.Hour)
	if gone, err := s.DeleteDue(ctx); err != nil || len(gone) != 0 {
		t.Fatalf("DeleteDue after the cancel: %v, %v", gone, err)
	}

	// Scheduled again, it goes at its time, and only then.
	if _, err := s.ScheduleKeyDeletion(ctx, "k", time.Minute); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if gone, err := s.DeleteDue(ctx); err != nil || !slices.Equal(gone, []string{"k"}) {
		t.Fatalf("DeleteDue at the time: %v, %v", gone, err)
	}
	if _, err := s.DescribeKey(ctx, "k"); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("DescribeKey after the deletion: %v", err)
	}
	if _, err := s.DescribeKey(ctx, "keep"); err != nil {
		t.Fatalf("the other key: %v", err)
	}
}

// Services sharing a store all look for due deletions at once: each key
// is deleted by exactly one of them.
func TestDeleteDueAcrossServices(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	store := NewMemStore()
	var svcs []*Service
	for range 3 {
		s, err := New(Config{Keystore: store, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, s)
	}
	names := []string{"a", "b", "c", "d"}
	for _, n := range names {
		if _, err := svcs[0].CreateKey(ctx, n, KeyConfig{DeletionAllowed: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := svcs[1].ScheduleKeyDeletion(ctx, n, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Hour)
	var mu sync.Mutex
	count := map[string]int{}
	var wg sync.WaitGroup
	for _, s := range svcs {
		for range 4 {
			wg.Go(func() {
				gone, err := s.DeleteDue(ctx)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				for _, n := range gone {
					count[n]++
				}
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	for _, n := range names {
		if count[n] != 1 {
			t.Errorf("key %s reported deleted %d times, want once", n, count[n])
		}
	}
	if left, _ := store.List(ctx); len(left) != 0 {
		t.Errorf("keys left: %v", left)
	}
}

// A disabled version neither seals nor opens, JSON or stream, and the
// latest version's being disabled does not make an older one seal.
func TestDisabledVersions(t *testing.T) {
	ctx := context.Background()
	s, err := New(Config{Keystore: NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateKey(ctx, "k", KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	v1, _, err := s.Seal(ctx, "k", []byte("one"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s1 := sealStream(t, s, "k", []byte("stream one"))
	if _, err := s.RotateKey(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	v2, _, err := s.Seal(ctx, "k", []byte("two"), nil)
	if err != nil {
		t.Fatal(err)
	}

	disabled := func(what string, err error, v uint32) {
		t.Helper()
		ve, ok := errors.AsType[*VersionError](err)
		if !ok || !errors.Is(err, ErrVersionDisabled) || ve.Version != v {
			t.Errorf("%s: %v, want version %d disabled", what, err, v)
		}
	}
	k, err := s.DisableKeyVersion(ctx, "k", 1)
	if err != nil || !slices.Equal(k.DisabledVersions, []uint32{1}) {
		t.Fatalf("disable 1: %+v, %v", k.DisabledVersions, err)
	}
	if k, err = s.DisableKeyVersion(ctx, "k", 1); err != nil || !slices.Equal(k.DisabledVersions, []uint32{1}) {
		t.Fatalf("disable 1 again: %+v, %v", k.DisabledVersions, err)
	}
	_, _, err = s.Open(ctx, "k", v1, nil)
	disabled("Open of version 1", err, 1)
	_, err = openStream(s, "k", s1)
	disabled("DecryptReader of version 1", err, 1)
	_, _, err = s.Rewrap(ctx, "k", s1, nil)
	disabled("Rewrap of version 1", err, 1)
	if pt, _, err := s.Open(ctx, "k", v2, nil); err != nil || string(pt) != "two" {
		t.Fatalf("version 2 with 1 disabled: %q, %v", pt, err)
	}
	if _, info, err := s.Seal(ctx, "k", []byte("x"), nil); err != nil || info.Version != 2 {
		t.Fatalf("seal with 1 disabled: %+v, %v", info, err)
	}

	// The latest disabled: nothing seals, not even under version 1 once
	// it is enabled again.
	if _, err := s.EnableKeyVersion(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	if k, err = s.DisableKeyVersion(ctx, "k", 2); err != nil || !slices.Equal(k.DisabledVersions, []uint32{2}) {
		t.Fatalf("disable 2: %+v, %v", k.DisabledVersions, err)
	}
	_, _, err = s.Seal(ctx, "k", []byte("x"), nil)
	disabled("Seal with the latest disabled", err, 2)
	_, err = s.EncryptWriter(ctx, "k", io.Discard, nil)
	disabled("EncryptWriter with the latest disabled", err, 2)
	_, err = s.NewDataKey(ctx, "k", 32, nil, false)
	disabled("NewDataKey with the latest disabled", err, 2)
	_, err = s.NewSealingKey(ctx, "k")
	disabled("NewSealingKey with the latest disabled", err, 2)
	_, _, err = s.Rewrap(ctx, "k", s1, nil)
	disabled("Rewrap to a disabled latest", err, 2)
	_, _, err = s.Open(ctx, "k", v2, nil)
	disabled("Open of version 2", err, 2)
	if pt, err := openStream(s, "k", s1); err != nil || string(pt) != "stream one" {
		t.Fatalf("version 1 enabled again: %q, %v", pt, err)
	}

	if k, err = s.EnableKeyVersion(ctx, "k", 2); err != nil || k.DisabledVersions != nil {
		t.Fatalf("enable 2: %+v, %v", k.DisabledVersions, err)
	}
	if pt, _, err := s.Open(ctx, "k", v2, nil); err != nil || string(pt) != "two" {
		t.Fatalf("version 2 enabled again: %q, %v", pt, err)
	}
	if _, _, err := s.Seal(ctx, "k", []byte("x"), nil); err != nil {
		t.Fatalf("seal with every version enabled: %v", err)
	}
	for _, v := range []uint32{0, 3} {
		if _, err := s.DisableKeyVersion(ctx, "k", v); !errors.Is(err, ErrKeyNotFound) {
			t.Errorf("disable version %d: %v", v, err)
		}
	}
}

// A trim destroys the versions below its minimum, only retired ones, and
// what they sealed no longer opens.
func TestTrimKey(t *testing.T) {
	ctx := context.Background()
	s, err := New(Config{Keystore: NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateKey(ctx, "k", KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	var cts [][]byte // cts[i] sealed under version i+1
	for v := 1; v <= 4; v++ {
		if v > 1 {
			if _, err := s.RotateKey(ctx, "k"); err != nil {
				t.Fatal(err)
			}
		}
		ct, _, err := s.Seal(ctx, "k", []byte{byte(v)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		cts = append(cts, ct)
	}
	if _, err := s.DisableKeyVersion(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DisableKeyVersion(ctx, "k", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TrimKey(ctx, "k", 2); !errors.Is(err, ErrTrimAboveMinDecryption) {
		t.Fatalf("trim with every version decrypting: %v", err)
	}
	if _, err := s.ConfigureKey(ctx, "k", KeyConfig{MinDecryptionVersion: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TrimKey(ctx, "k", 4); !errors.Is(err, ErrTrimAboveMinDecryption) {
		t.Fatalf("trim above min_decryption_version: %v", err)
	}
	if _, err := s.TrimKey(ctx, "k", 1); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("trim to version 1: %v", err)
	}
	k, err := s.TrimKey(ctx, "k", 3)
	if err != nil {
		t.Fatal(err)
	}
	if k.MinAvailableVersion != 3 || len(k.Versions) != 2 || k.Versions[0].Version != 3 || !slices.Equal(k.DisabledVersions, []uint32{3}) {
		t.Fatalf("after the trim: %+v", k)
	}
	for i, ct := range cts[:2] {
		_, _, err := s.Open(ctx, "k", ct, nil)
		if ve, ok := errors.AsType[*VersionError](err); !ok || !errors.Is(err, ErrVersionDestroyed) || ve.Version != uint32(i+1) {
			t.Errorf("version %d after the trim: %v, want ErrVersionDestroyed", i+1, err)
		}
	}
	if pt, _, err := s.Open(ctx, "k", cts[3], nil); err != nil || !bytes.Equal(pt, []byte{4}) {
		t.Fatalf("version 4 after the trim: %v, %v", pt, err)
	}
	if _, err := s.TrimKey(ctx, "k", 3); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("the same trim again: %v", err)
	}
	if _, err := s.DisableKeyVersion(ctx, "k", 2); !errors.Is(err, ErrVersionDestroyed) {
		t.Fatalf("disable a destroyed version: %v", err)
	}
	if _, err := s.ConfigureKey(ctx, "k", KeyConfig{MinDecryptionVersion: 2}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("min_decryption_version below the trim: %v", err)
	}
	if k, err = s.RotateKey(ctx, "k"); err != nil || k.Latest() != 5 {
		t.Fatalf("rotate after the trim: %+v, %v", k, err)
	}
	if _, info, err := s.Seal(ctx, "k", []byte("5"), nil); err != nil || info.Version != 5 {
		t.Fatalf("seal after the trim: %+v, %v", info, err)
	}
}

// The file keystore keeps the lifecycle's state across a restart: a
// deletion still pending at its time, disabled and destroyed versions.
func TestFileStoreKeepsLifecycle(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root := ksTestSecret(t)
	clock := newTestClock()
	store := ksOpenFile(t, dir, &root)
	s, err := New(Config{Keystore: store, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateKey(ctx, "doomed", KeyConfig{DeletionAllowed: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateKey(ctx, "old", KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	var cts [][]byte // cts[i] sealed under version i+1 of "old"
	for v := 1; v <= 4; v++ {
		if v > 1 {
			if _, err := s.RotateKey(ctx, "old"); err != nil {
				t.Fatal(err)
			}
		}
		ct, _, err := s.Seal(ctx, "old", []byte{byte(v)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		cts = append(cts, ct)
	}
	if _, err := s.ConfigureKey(ctx, "old", KeyConfig{MinDecryptionVersion: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TrimKey(ctx, "old", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DisableKeyVersion(ctx, "old", 3); err != nil {
		t.Fatal(err)
	}
	doomed, err := s.ScheduleKeyDeletion(ctx, "doomed", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	wantOld, _ := s.DescribeKey(ctx, "old")
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	store = ksOpenFile(t, dir, &root)
	s, err = New(Config{Keystore: store, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Seal(ctx, "doomed", nil, nil); !errors.Is(err, ErrKeyPendingDeletion) {
		t.Fatalf("seal under the pending key after the restart: %v", err)
	}
	if d, err := s.DescribeKey(ctx, "doomed"); err != nil || d.Deletion == nil || !d.Deletion.DeleteAt.Equal(doomed.Deletion.DeleteAt) || !d.Deletion.Scheduled.Equal(doomed.Deletion.Scheduled) {
		t.Fatalf("deletion after the restart: %+v, %v; want %+v", d.Deletion, err, doomed.Deletion)
	}
	old, err := s.DescribeKey(ctx, "old")
	if err != nil || old.MinAvailableVersion != 2 || !slices.Equal(old.DisabledVersions, []uint32{3}) || len(old.Versions) != len(wantOld.Versions) {
		t.Fatalf("after the restart: %+v, %v; want %+v", old, err, wantOld)
	}
	if _, _, err := s.Open(ctx, "old", cts[0], nil); !errors.Is(err, ErrVersionDestroyed) {
		t.Errorf("version 1 after the restart: %v", err)
	}
	if _, _, err := s.Open(ctx, "old", cts[2], nil); !errors.Is(err, ErrVersionDisabled) {
		t.Errorf("version 3 after the restart: %v", err)
	}
	for _, i := range []int{1, 3} {
		if pt, _, err := s.Open(ctx, "old", cts[i], nil); err != nil || !bytes.Equal(pt, []byte{byte(i + 1)}) {
			t.Errorf("version %d after the restart: %v, %v", i+1, pt, err)
		}
	}
	clock.Advance(time.Hour)
	if gone, err := s.DeleteDue(ctx); err != nil || !slices.Equal(gone, []string{"doomed"}) {
		t.Fatalf("DeleteDue after the restart: %v, %v", gone, err)
	}
}
