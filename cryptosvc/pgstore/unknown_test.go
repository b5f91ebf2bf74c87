package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/pgtest"
)

// A key created on one replica serves on every other at once: sealing,
// describing, rotating and opening under it, before its notification has
// arrived. The first part creates keys whose notification never comes, so
// only a read on miss can find them; the second creates keys the ordinary
// way and uses each on another replica straight after.
func TestCreatedElsewhereServesAtOnce(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.Database(t)
	root := keystoretest.Secret(t)
	rs := replicas(t, dsn, &root, 3, nil)
	ctx := context.Background()

	createSilently(t, rs[0].store, dsn, keystoretest.Key(t, "quiet", 1))
	ct, info, err := rs[1].svc.Seal(ctx, "quiet", []byte("made at once"), nil)
	if err != nil || info.Version != 1 {
		t.Fatalf("seal on another replica: version %d, %v", info.Version, err)
	}
	if k, err := rs[2].svc.DescribeKey(ctx, "quiet"); err != nil || k.Latest() != 1 {
		t.Fatalf("describe on a third replica: %+v, %v", k, err)
	}
	if pt, _, err := rs[0].svc.Open(ctx, "quiet", ct, nil); err != nil || string(pt) != "made at once" {
		t.Fatalf("open on the first replica: %q, %v", pt, err)
	}
	createSilently(t, rs[0].store, dsn, keystoretest.Key(t, "quiet2", 1))
	if k, err := rs[2].svc.RotateKey(ctx, "quiet2"); err != nil || k.Latest() != 2 {
		t.Fatalf("rotate on another replica: %+v, %v", k, err)
	}

	for i := range 10 {
		name := fmt.Sprintf("loud%d", i)
		if _, err := rs[i%3].svc.CreateKey(ctx, name, cryptosvc.KeyConfig{}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := rs[(i+1)%3].svc.Seal(ctx, name, []byte("x"), nil); err != nil {
			t.Fatalf("seal under %s on the next replica straight after its creation: %v", name, err)
		}
	}
}

// Concurrent misses of one name share one read (two at most: one running,
// and one for the callers that came during it).
func TestUnknownNameCoalesced(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.Database(t)
	root := keystoretest.Secret(t)
	rs := replicas(t, dsn, &root, 2, nil)
	ctx := context.Background()
	createSilently(t, rs[0].store, dsn, keystoretest.Key(t, "quiet", 1))
	b := rs[1]
	// Stopped, so that "nobody" stays remembered absent however slowly
	// the goroutines run.
	stopped := time.Now()
	b.store.now = func() time.Time { return stopped }
	before := b.store.reads.Load()
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			if _, _, err := b.svc.Seal(ctx, "quiet", []byte("x"), nil); err != nil {
				t.Errorf("seal: %v", err)
			}
			if _, err := b.store.Refresh(ctx, "nobody", nil); !errors.Is(err, cryptosvc.ErrKeyNotFound) {
				t.Errorf("Refresh of a name nobody made = %v, want ErrKeyNotFound", err)
			}
		})
	}
	wg.Wait()
	if n := b.store.reads.Load() - before; n > 4 {
		t.Errorf("64 concurrent misses of two names made %d reads, want at most 4", n)
	}
}

// A flood of distinct unknown names costs the database at most the pace
// of unknown reads, and leaves bounded state behind.
func TestUnknownNamesFlood(t *testing.T) {
	srv := pgtest.Shared(t)
	root := keystoretest.Secret(t)
	st := open(t, srv.Database(t), &root)
	ctx := context.Background()
	before := st.reads.Load()
	start := time.Now()
	for wave := range 3 {
		var wg sync.WaitGroup
		for i := range 1000 {
			wg.Go(func() {
				name := fmt.Sprintf("ghost-%d-%d", wave, i)
				if _, err := st.Refresh(ctx, name, nil); !errors.Is(err, cryptosvc.ErrKeyNotFound) {
					t.Errorf("Refresh(%s) = %v, want ErrKeyNotFound", name, err)
				}
			})
		}
		wg.Wait()
	}
	elapsed := time.Since(start)
	n := st.reads.Load() - before
	// The token bucket's own bound: its burst, then its rate.
	if limit := unknownBurst + int64(math.Ceil(elapsed.Seconds()*unknownRate)); n > limit {
		t.Errorf("3000 unknown names in %v made %d reads, want at most %d", elapsed, n, limit)
	}
	st.flightMu.Lock()
	remembered, flights := len(st.unknown.absent), len(st.flights)
	st.flightMu.Unlock()
	if remembered > maxAbsent || flights != 0 {
		t.Errorf("after the flood: %d names remembered absent (at most %d), %d flights", remembered, maxAbsent, flights)
	}
	t.Logf("3000 unknown names: %d reads in %v", n, elapsed)
}

// A name found absent is answered from memory for absentTTL, and not a
// moment longer than the key's arrival in memory: its creation here, or
// its notification from elsewhere, forgets the answer.
func TestAbsentNameRemembered(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.Database(t)
	root := keystoretest.Secret(t)
	rs := replicas(t, dsn, &root, 2, nil)
	ctx := context.Background()
	b := rs[1]
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var clock sync.Mutex
	b.store.now = func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
	advance := func(d time.Duration) { clock.Lock(); now = now.Add(d); clock.Unlock() }
	refresh := func(name string) (int64, error) {
		before := b.store.reads.Load()
		_, err := b.store.Refresh(ctx, name, nil)
		return b.store.reads.Load() - before, err
	}

	if n, err := refresh("later"); !errors.Is(err, cryptosvc.ErrKeyNotFound) || n != 1 {
		t.Fatalf("first miss: %v, %d reads", err, n)
	}
	if n, err := refresh("later"); !errors.Is(err, cryptosvc.ErrKeyNotFound) || n != 0 {
		t.Fatalf("second miss within %v: %v, %d reads, want none", absentTTL, err, n)
	}
	createSilently(t, rs[0].store, dsn, keystoretest.Key(t, "later", 1))
	advance(absentTTL)
	if n, err := refresh("later"); err != nil || n != 1 {
		t.Fatalf("miss %v later, after a creation elsewhere: %v, %d reads", absentTTL, err, n)
	}

	// A key created here, or notified from elsewhere, forgets its name's
	// not-found answer.
	remembered := func(name string) bool {
		b.store.flightMu.Lock()
		defer b.store.flightMu.Unlock()
		_, ok := b.store.unknown.absent[name]
		return ok
	}
	for _, name := range []string{"mine", "theirs"} {
		if _, err := refresh(name); !errors.Is(err, cryptosvc.ErrKeyNotFound) || !remembered(name) {
			t.Fatalf("miss of %s: %v, remembered %v", name, err, remembered(name))
		}
	}
	if _, err := b.svc.CreateKey(ctx, "mine", cryptosvc.KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	if remembered("mine") {
		t.Error("a key created here is still remembered absent")
	}
	createAndAwait(t, rs[0], b, "theirs")
	if remembered("theirs") {
		t.Error("a key notified from elsewhere is still remembered absent")
	}
}

// createSilently inserts k as Create would, but without the NOTIFY: no
// replica hears of it.
func createSilently(t *testing.T, s *Store, dsn string, k *cryptosvc.StoredKey) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	meta, err := s.sealMeta(k)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO cipherd_keys (name, revision, meta) VALUES ($1, nextval('cipherd_revision'), $2)`, k.Name, meta); err != nil {
		t.Fatal(err)
	}
	for i := range k.Versions {
		sealed, err := s.sealVersion(k.Name, &k.Versions[i])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO cipherd_key_versions (name, version, sealed) VALUES ($1, $2, $3)`, k.Name, int32(k.Versions[i].Version), sealed); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
