package pgstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/pgtest"
)

// The scenarios run three replicas in one process: three Stores on one
// database, each under its own Service (with its own in-process lock),
// which is what three cipherd processes are to the database.

type replica struct {
	store *Store
	svc   *cryptosvc.Service
}

func replicas(t *testing.T, dsn string, root *cryptosvc.Secret, n int, now func() time.Time) []replica {
	t.Helper()
	var rs []replica
	for range n {
		st := open(t, dsn, root)
		svc, err := cryptosvc.New(cryptosvc.Config{Keystore: st, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, replica{st, svc})
	}
	return rs
}

// 100 rotations in parallel spread over 3 replicas make versions 2…101,
// each exactly once.
func TestScenarioParallelRotations(t *testing.T) {
	srv := pgtest.Shared(t)
	root := keystoretest.Secret(t)
	rs := replicas(t, srv.Database(t), &root, 3, nil)
	ctx := context.Background()
	if _, err := rs[0].svc.CreateKey(ctx, "k", cryptosvc.KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs[1:] {
		if _, err := r.store.Refresh(ctx, "k", nil); err != nil {
			t.Fatal(err)
		}
	}
	const rotations = 100
	var mu sync.Mutex
	got := map[uint32]int{}
	var wg sync.WaitGroup
	for i := range rotations {
		wg.Go(func() {
			k, err := rs[i%len(rs)].svc.RotateKey(ctx, "k")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			got[k.Latest()]++
			mu.Unlock()
		})
	}
	wg.Wait()
	for v := uint32(2); v <= rotations+1; v++ {
		if got[v] != 1 {
			t.Errorf("version %d made %d times, want once", v, got[v])
		}
	}
	for i, r := range rs {
		k, err := r.store.Refresh(ctx, "k", nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(k.Versions) != rotations+1 {
			t.Errorf("replica %d: %d versions, want %d", i, len(k.Versions), rotations+1)
		}
	}
}

// A rotation on one replica: every other seals under the new version
// within 1 s, without being asked.
func TestScenarioRotationVisible(t *testing.T) {
	srv := pgtest.Shared(t)
	root := keystoretest.Secret(t)
	rs := replicas(t, srv.Database(t), &root, 3, nil)
	ctx := context.Background()
	if _, err := rs[0].svc.CreateKey(ctx, "k", cryptosvc.KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	for round := range 5 {
		from := rs[round%3]
		k, err := from.svc.RotateKey(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for i, r := range rs {
			for {
				_, info, err := r.svc.Seal(ctx, "k", []byte("x"), nil)
				if err == nil && info.Version == k.Latest() {
					break
				}
				if time.Since(start) > time.Second {
					t.Fatalf("round %d: replica %d seals under version %d (err %v) 1 s after the rotation to %d", round, i, info.Version, err, k.Latest())
				}
				time.Sleep(time.Millisecond)
			}
		}
		t.Logf("round %d: every replica sealed under version %d after %v", round, k.Latest(), time.Since(start))
	}
}

// A ciphertext under a version this replica has not heard of opens: the
// version is read from the database on the miss, once however many
// requests ask at the same time.
func TestScenarioReadOnMiss(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.Database(t)
	root := keystoretest.Secret(t)
	rs := replicas(t, dsn, &root, 2, nil)
	ctx := context.Background()
	if _, err := rs[0].svc.CreateKey(ctx, "k", cryptosvc.KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rs[1].store.Refresh(ctx, "k", nil); err != nil {
		t.Fatal(err)
	}
	// The creation's notification may still be on its way to the second
	// replica, and the read it causes would find version 2 if it ran after
	// the silent write below.
	awaitNotifications(t, rs[0], rs[1])
	// Version 2, written without its notification (as if it were still in
	// flight): only a read on miss can find it.
	k := keystoretest.MustGet(t, rs[0].store, "k").Clone()
	keystoretest.AddVersion(t, k, keystoretest.Secret(t))
	writeSilently(t, rs[0].store, dsn, k)
	if _, err := rs[0].store.Refresh(ctx, "k", nil); err != nil {
		t.Fatal(err)
	}
	ct, info, err := rs[0].svc.Seal(ctx, "k", []byte("made elsewhere"), []byte("ctx"))
	if err != nil || info.Version != 2 {
		t.Fatalf("seal: version %d, %v", info.Version, err)
	}
	if got := keystoretest.MustGet(t, rs[1].store, "k"); len(got.Versions) != 1 {
		t.Fatalf("the second replica has %d versions already: the test proves nothing", len(got.Versions))
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			pt, _, err := rs[1].svc.Open(ctx, "k", ct, []byte("ctx"))
			if err != nil || string(pt) != "made elsewhere" {
				t.Errorf("open on the other replica: %q, %v", pt, err)
			}
		})
	}
	wg.Wait()
	// A version that exists nowhere is still not found.
	bogus := keystoretest.MustGet(t, rs[0].store, "k").Clone()
	keystoretest.AddVersion(t, bogus, keystoretest.Secret(t))
	mem := cryptosvc.NewMemStore()
	mem.Create(ctx, bogus)
	other, _ := cryptosvc.New(cryptosvc.Config{Keystore: mem})
	ct3, _, _ := other.Seal(ctx, "k", []byte("x"), nil)
	if _, _, err := rs[1].svc.Open(ctx, "k", ct3, nil); !errors.Is(err, cryptosvc.ErrKeyNotFound) {
		t.Fatalf("open under a version no replica made = %v, want ErrKeyNotFound", err)
	}
}

// TestPoolResetWhenListenerLost: a replica that read from the database
// just before it was killed, asked for a version made elsewhere just after
// it came back, finds it at once. pgxpool hands out a connection idle for
// under a second without a ping, so the pooled one, dead since the kill,
// would fail that read unless the store closes its pool's connections when
// its listening connection is lost.
func TestPoolResetWhenListenerLost(t *testing.T) {
	srv := pgtest.Start(t) // its own: this test kills it
	r, dsn := pooledReplica(t, srv)
	st := r.store
	ctx := context.Background()
	if st.pool.Stat().IdleConns() == 0 {
		t.Fatal("no idle pooled connection before the kill: the test proves nothing")
	}
	killed := time.Now()
	srv.Kill(t)
	waitUnhealthy(t, 0, st)
	if n := st.pool.Stat().IdleConns(); n != 0 {
		t.Errorf("%d idle pooled connections once the listener is lost, want 0", n)
	}
	srv.Restart(t)

	// Version 2, written by another client without notification: only a
	// read on miss finds it.
	ct := sealElsewhere(t, st, dsn)
	pt, _, err := r.svc.Open(ctx, "k", ct, nil)
	if err != nil || string(pt) != "made elsewhere" {
		t.Fatalf("open %v after the kill: %q, %v", time.Since(killed).Round(time.Millisecond), pt, err)
	}
	t.Logf("opened a version made elsewhere %v after the kill", time.Since(killed).Round(time.Millisecond))
}

// TestReadOnMissAfterPooledConnectionDies: a pooled connection whose
// backend ended while the listening connection stayed up (a proxy or a
// failover that cut some connections, or one dialled as the database
// crashed) does not fail the next read on miss. pgxpool pings by default
// only a connection idle for over a second, and this one was used
// moments before.
func TestReadOnMissAfterPooledConnectionDies(t *testing.T) {
	r, dsn := pooledReplica(t, pgtest.Shared(t))
	st := r.store
	ctx := context.Background()
	var pids []uint32
	for _, c := range st.pool.AcquireAllIdle(ctx) {
		pids = append(pids, c.Conn().PgConn().PID())
		c.Release()
	}
	if len(pids) == 0 {
		t.Fatal("no idle pooled connection: the test proves nothing")
	}
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, pid := range pids {
		if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1, 5000)`, int32(pid)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Health(); err != nil {
		t.Fatalf("the listening connection went too: %v", err)
	}

	k := keystoretest.MustGet(t, st, "k").Clone()
	keystoretest.AddVersion(t, k, keystoretest.Secret(t))
	writeSilently(t, st, dsn, k)
	got, err := st.Refresh(ctx, "k", nil)
	if err != nil {
		t.Fatalf("read on miss after %d pooled connections died: %v", len(pids), err)
	}
	if got.Version(2) == nil {
		t.Fatalf("read on miss found versions up to %d, want 2", got.Latest().Version)
	}
}

// pooledReplica starts one replica on a new database of srv, creates the
// key "k" and reads it through the pool, which then holds a connection
// used just now.
func pooledReplica(t *testing.T, srv *pgtest.Server) (replica, string) {
	t.Helper()
	dsn := srv.Database(t)
	root := keystoretest.Secret(t)
	r := replicas(t, dsn, &root, 1, nil)[0]
	ctx := context.Background()
	if _, err := r.svc.CreateKey(ctx, "k", cryptosvc.KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.Refresh(ctx, "k", nil); err != nil {
		t.Fatal(err)
	}
	return r, dsn
}

// waitUnhealthy waits up to 15 s for replica i's store to report the
// database unreachable.
func waitUnhealthy(t *testing.T, i int, st *Store) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for st.Health() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("replica %d still reports a healthy database", i)
		}
		time.Sleep(time.Millisecond)
	}
}

// awaitNotifications returns once to has handled every notification of
// from's writes so far: it creates the key "barrier" on from (each test has
// a database of its own) and waits for to to load it on its notification,
// which it handles after the earlier ones, one at a time and in commit
// order.
func awaitNotifications(t *testing.T, from, to replica) {
	t.Helper()
	createAndAwait(t, from, to, "barrier")
}

// createAndAwait creates the key name on from and waits until to has it.
func createAndAwait(t *testing.T, from, to replica, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := from.svc.CreateKey(ctx, name, cryptosvc.KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := to.store.Get(ctx, name); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the key %s was not notified to the other replica within 10 s", name)
		}
		time.Sleep(time.Millisecond)
	}
}

// writeSilently stores k's next revision as a rotation would, but without
// the NOTIFY.
func writeSilently(t *testing.T, s *Store, dsn string, k *cryptosvc.StoredKey) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	last := &k.Versions[len(k.Versions)-1]
	sealed, err := s.sealVersion(k.Name, last)
	if err != nil {
		t.Fatal(err)
	}
	// One transaction, as the store writes: a replica that reloads the key
	// meanwhile (on a late notification of an earlier write) must never
	// see the new revision without its version, which it would then keep,
	// since a revision names one content.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `UPDATE cipherd_keys SET revision = nextval('cipherd_revision') WHERE name = $1`, k.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO cipherd_key_versions (name, version, sealed) VALUES ($1, $2, $3)`, k.Name, int32(last.Version), sealed); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// PostgreSQL killed with SIGKILL under load, then restarted: no data
// request fails; key administration fails with ErrUnavailable during the
// outage, quickly; every replica reconnects, catches up on a rotation
// made while it was away, and writes again.
func TestScenarioDatabaseKilled(t *testing.T) {
	srv := pgtest.Start(t) // its own: this test kills it
	dsn := srv.Database(t)
	root := keystoretest.Secret(t)
	rs := replicas(t, dsn, &root, 3, nil)
	ctx := context.Background()
	if _, err := rs[0].svc.CreateKey(ctx, "k", cryptosvc.KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs[1:] {
		if _, err := r.store.Refresh(ctx, "k", nil); err != nil {
			t.Fatal(err)
		}
	}

	stop := make(chan struct{})
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	for i := range 6 {
		r := rs[i%3]
		peer := rs[(i+1)%3]
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ct, _, err := r.svc.Seal(ctx, "k", []byte("payload"), nil)
				if err == nil {
					_, _, err = peer.svc.Open(ctx, "k", ct, nil)
				}
				if err != nil {
					failed.Add(1)
					t.Errorf("data request: %v", err)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				ok.Add(1)
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	srv.Kill(t)
	for i, r := range rs {
		waitUnhealthy(t, i, r.store)
	}
	start := time.Now()
	_, err := rs[1].svc.RotateKey(ctx, "k")
	if !errors.Is(err, cryptosvc.ErrUnavailable) {
		t.Fatalf("rotation during the outage = %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 6*time.Second {
		t.Errorf("the rotation took %v to fail", d)
	}
	if _, err := rs[2].svc.CreateKey(ctx, "new", cryptosvc.KeyConfig{}); !errors.Is(err, cryptosvc.ErrUnavailable) {
		t.Fatalf("create during the outage = %v, want ErrUnavailable", err)
	}
	during := ok.Load()
	time.Sleep(300 * time.Millisecond)
	if ok.Load() == during {
		t.Fatal("no data request succeeded during the outage")
	}

	srv.Restart(t)
	var k cryptosvc.Key
	deadline := time.Now().Add(20 * time.Second)
	for {
		k, err = rs[0].svc.RotateKey(ctx, "k")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rotation after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i, r := range rs {
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, info, err := r.svc.Seal(ctx, "k", []byte("x"), nil)
			if err == nil && info.Version == k.Latest() && r.store.Health() == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d did not catch up (version %d, health %v)", i, info.Version, r.store.Health())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d data requests failed (of %d)", failed.Load(), failed.Load()+ok.Load())
	}
	t.Logf("%d seal+open round trips, none failed", ok.Load())
	if got := keystoretest.MustGet(t, rs[2].store, "k"); len(got.Versions) != 2 {
		t.Fatalf("%d versions after the outage, want 2 (the failed rotation must leave none)", len(got.Versions))
	}
}

// A rotation period of 2 s with 3 replicas each checking often: one new
// version per period, never two.
func TestScenarioRotationPeriod(t *testing.T) {
	srv := pgtest.Shared(t)
	root := keystoretest.Secret(t)
	rs := replicas(t, srv.Database(t), &root, 3, nil)
	ctx := context.Background()
	const period = 2 * time.Second
	for i := range rs {
		svc, err := cryptosvc.New(cryptosvc.Config{Keystore: rs[i].store, MinRotationPeriod: period})
		if err != nil {
			t.Fatal(err)
		}
		rs[i].svc = svc
	}
	created, err := rs[0].svc.CreateKey(ctx, "k", cryptosvc.KeyConfig{RotationPeriod: cryptosvc.Duration(period)})
	if err != nil {
		t.Fatal(err)
	}
	runFor := 7 * time.Second
	stop := time.Now().Add(runFor)
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if _, err := r.svc.RotateDue(ctx); err != nil {
					t.Error(err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	k, err := rs[0].store.Refresh(ctx, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Version n+1 is due at period after version n: in 7 s, 3 rotations.
	if want := 1 + int(runFor/period); len(k.Versions) != want {
		t.Fatalf("%d versions after %v with a period of %v, want %d", len(k.Versions), runFor, period, want)
	}
	prev := created.Versions[0].Created
	for _, v := range k.Versions[1:] {
		if gap := v.Created.Sub(prev); gap < period {
			t.Errorf("version %d only %v after the one before", v.Version, gap)
		}
		prev = v.Created
	}
	t.Logf("versions at %v", func() (out []string) {
		for _, v := range k.Versions {
			out = append(out, v.Created.Sub(created.Created).Round(10*time.Millisecond).String())
		}
		return
	}())
}

// sealElsewhere writes version 2 of key "k" to the database without its
// notification, so that only a read on miss brings it into st's memory, and
// returns a message sealed under it by a service that is not st's.
func sealElsewhere(t *testing.T, st *Store, dsn string) []byte {
	t.Helper()
	ctx := context.Background()
	k := keystoretest.MustGet(t, st, "k").Clone()
	keystoretest.AddVersion(t, k, keystoretest.Secret(t))
	writeSilently(t, st, dsn, k)
	mem := cryptosvc.NewMemStore()
	if err := mem.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	other, err := cryptosvc.New(cryptosvc.Config{Keystore: mem})
	if err != nil {
		t.Fatal(err)
	}
	ct, info, err := other.Seal(ctx, "k", []byte("made elsewhere"), nil)
	if err != nil || info.Version != 2 {
		t.Fatalf("seal elsewhere: version %d, %v", info.Version, err)
	}
	return ct
}
