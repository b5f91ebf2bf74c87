package keystoretest

import (
	"context"
	"testing"
	"time"

	"github.com/cipherd/cipherd/cryptosvc"
)

// testUsage: a UsageStore adds deltas to its totals (the later LastUsed
// kept), drops those of keys and versions it does not hold, starts a key
// made anew under a deleted one's name from zero, and, shared, sums what
// every replica adds.
func testUsage(t *testing.T, kind Kind) {
	ctx := context.Background()
	s := kind.Open(t, []*key{Key(t, "u", 2), Key(t, "other", 1)})
	us, ok := s.(cryptosvc.UsageStore)
	if !ok {
		t.Skipf("%s keeps no usage counts", kind.Name)
	}
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	add := func(us cryptosvc.UsageStore, d ...cryptosvc.VersionUsage) {
		t.Helper()
		if err := us.AddUsage(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	add(us,
		cryptosvc.VersionUsage{Key: "u", Version: 1, Sealed: 3, Opened: 1, LastUsed: t0},
		cryptosvc.VersionUsage{Key: "u", Version: 2, LocalSealKeys: 2, LastUsed: t0},
		cryptosvc.VersionUsage{Key: "u", Version: 3, Sealed: 100, LastUsed: t0},       // no such version
		cryptosvc.VersionUsage{Key: "missing", Version: 1, Sealed: 100, LastUsed: t0}, // no such key
	)
	add(us, cryptosvc.VersionUsage{Key: "u", Version: 1, Sealed: 4, Opened: 5, LastUsed: t0.Add(-time.Hour)})
	want := []cryptosvc.VersionUsage{
		{Key: "u", Version: 1, Sealed: 7, Opened: 6, LastUsed: t0},
		{Key: "u", Version: 2, LocalSealKeys: 2, LastUsed: t0},
	}
	assertUsage(t, us, "u", want)
	assertUsage(t, us, "missing", nil)

	if kind.Peer != nil {
		p := kind.Peer(t, s).(cryptosvc.UsageStore)
		add(p, cryptosvc.VersionUsage{Key: "u", Version: 2, Sealed: 1, Opened: 2, LastUsed: t0.Add(time.Minute)})
		want[1] = cryptosvc.VersionUsage{Key: "u", Version: 2, Sealed: 1, Opened: 2, LocalSealKeys: 2, LastUsed: t0.Add(time.Minute)}
		assertUsage(t, us, "u", want)
		assertUsage(t, p, "u", want)
	}

	if err := s.Delete(ctx, "u", MustGet(t, s, "u").Revision); err != nil {
		t.Fatal(err)
	}
	add(us, cryptosvc.VersionUsage{Key: "u", Version: 1, Sealed: 9, LastUsed: t0}) // a flush after the delete
	if err := s.Create(ctx, Key(t, "u", 1)); err != nil {
		t.Fatal(err)
	}
	assertUsage(t, us, "u", nil)
	add(us, cryptosvc.VersionUsage{Key: "u", Version: 1, Opened: 1, LastUsed: t0})
	assertUsage(t, us, "u", []cryptosvc.VersionUsage{{Key: "u", Version: 1, Opened: 1, LastUsed: t0}})
}

// assertUsage checks the counts us holds of key name.
func assertUsage(t *testing.T, us cryptosvc.UsageStore, name string, want []cryptosvc.VersionUsage) {
	t.Helper()
	got, err := us.Usage(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("usage of %s: %+v, want %+v", name, got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Key != w.Key || g.Version != w.Version || g.Sealed != w.Sealed || g.Opened != w.Opened ||
			g.LocalSealKeys != w.LocalSealKeys || !g.LastUsed.Equal(w.LastUsed) {
			t.Fatalf("usage of %s: %+v, want %+v", name, got, want)
		}
	}
}
