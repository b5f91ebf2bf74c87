package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/pgtest"
)

// TestFailedReadKeepsServingWhatMemoryGained: two decryptions under a
// version memory lacks, the second missing it while the read the first
// started is running, and so waiting for the read after (the running one
// may have begun before the version was written). The running read brings
// the version into memory; the next read fails, as when the database dies
// between the two. The second decryption opens all the same: the version
// is in memory by then, and keys in memory serve while the database is
// down.
//
// The database is not killed: the failure is a read that waits out its
// timeout on a table lock, which two other connections hand over so that
// the first read runs and the next one cannot.
func TestFailedReadKeepsServingWhatMemoryGained(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.Database(t)
	root := keystoretest.Secret(t)
	ctx := context.Background()
	const opTimeout = 2 * time.Second
	st, err := Open(ctx, Config{DSN: dsn, RootKey: &root, OpTimeout: opTimeout, ReconnectMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := cryptosvc.New(cryptosvc.Config{Keystore: st})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateKey(ctx, "k", cryptosvc.KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	// The store's listener may not have seen the creation's notification
	// yet; the read it could cause would take the first place in the
	// queue for the lock below, or find version 2.
	awaitNotifications(t, replicas(t, dsn, &root, 1, nil)[0], replica{st, svc})
	// Version 2, written without its notification and sealed under
	// elsewhere: only a read on miss brings it into this store's memory.
	ct := sealElsewhere(t, st, dsn)

	holder, queued := connect(t, dsn), connect(t, dsn)
	held, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback(ctx)
	if _, err := held.Exec(ctx, `LOCK TABLE cipherd_keys IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	lockWaiters := func() (n int) {
		err := held.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE relation = 'cipherd_keys'::regclass AND NOT granted`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	open := func() <-chan error {
		done := make(chan error, 1)
		go func() {
			pt, _, err := svc.Open(ctx, "k", ct, nil)
			if err == nil && string(pt) != "made elsewhere" {
				t.Errorf("opened to %q", pt)
			}
			done <- err
		}()
		return done
	}
	first := open()
	waitFor(t, "the first decryption's read to wait for the lock", func() bool { return lockWaiters() == 1 })
	second := open()
	waitFor(t, "the second decryption to queue behind the running read", func() bool {
		st.flightMu.Lock()
		defer st.flightMu.Unlock()
		q := st.flights["k"]
		return q != nil && q.next != nil
	})
	// The queued connection asks for the lock behind the running read: it
	// gets it when that read ends, before the next read can start.
	txq, err := queued.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer txq.Rollback(ctx)
	relocked := make(chan error, 1)
	go func() {
		_, err := txq.Exec(ctx, `LOCK TABLE cipherd_keys IN ACCESS EXCLUSIVE MODE`)
		relocked <- err
	}()
	waitFor(t, "the queued connection to wait for the lock", func() bool { return lockWaiters() == 2 })
	if err := held.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	if err := <-first; err != nil {
		t.Fatalf("the first decryption, whose read ran: %v", err)
	}
	if err := <-relocked; err != nil {
		t.Fatal(err)
	}
	if got := keystoretest.MustGet(t, st, "k"); got.Version(2) == nil {
		t.Fatal("version 2 is not in memory after the first read: the test proves nothing")
	}
	start := time.Now()
	err = <-second
	if d := time.Since(start); err == nil && d < opTimeout/2 {
		t.Fatalf("the second decryption ended %v after the lock was taken again: its read did not wait out its timeout, and the test proves nothing", d)
	}
	if err != nil {
		t.Fatalf("the second decryption, its read failed but version 2 in memory: %v", err)
	}
}

// connect opens a connection to dsn, closed when t ends.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// waitFor polls cond every millisecond for up to 10 s, failing the test
// with what it waited for.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
