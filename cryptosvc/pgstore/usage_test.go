package pgstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/pgtest"
)

// TestUsageThreeReplicas: three services on one database count and flush
// concurrently, many times; the table holds the exact sums, which every
// replica reads.
func TestUsageThreeReplicas(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.Database(t)
	root := keystoretest.Secret(t)
	ctx := context.Background()
	var svcs []*cryptosvc.Service
	for range 3 {
		svc, err := cryptosvc.New(cryptosvc.Config{Keystore: open(t, dsn, &root)})
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, svc)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := svcs[0].CreateKey(ctx, name, cryptosvc.KeyConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	const rounds, perRound = 20, 5
	var wg sync.WaitGroup
	for i, svc := range svcs {
		wg.Go(func() {
			// Keys in a different order on each replica: the flush's rows
			// lock in one order all the same.
			names := []string{"a", "b"}
			if i%2 == 1 {
				names = []string{"b", "a"}
			}
			for range rounds {
				for _, name := range names {
					for range perRound {
						ct, _, err := svc.Seal(ctx, name, []byte("x"), nil)
						if err == nil {
							_, _, err = svc.Open(ctx, name, ct, nil)
						}
						if err != nil {
							t.Error(err)
							return
						}
					}
				}
				if err := svc.FlushUsage(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	const want = 3 * rounds * perRound
	for i, svc := range svcs {
		for _, name := range []string{"a", "b"} {
			u, err := svc.KeyUsage(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if len(u) != 1 || u[0].Sealed != want || u[0].Opened != want || u[0].LastUsed.IsZero() {
				t.Fatalf("replica %d, key %s: %+v, want %d sealed and opened", i, name, u, want)
			}
		}
	}
}

// TestUsageSchemaUpgrade: a database of schema version 2, keys in it,
// upgrades to the usage and host tables at Open and keeps its keys.
func TestUsageSchemaUpgrade(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.Database(t)
	root := keystoretest.Secret(t)
	ctx := context.Background()
	k := keystoretest.Key(t, "kept", 2)
	s, err := Open(ctx, Config{DSN: dsn, RootKey: &root})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	s.Close()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DROP TABLE cipherd_key_usage; DROP TABLE cipherd_hosts; UPDATE cipherd_schema SET version = 2`); err != nil {
		t.Fatal(err)
	}

	s = open(t, dsn, &root)
	keystoretest.AssertKey(t, keystoretest.MustGet(t, s, "kept"), k)
	var v int
	if err := conn.QueryRow(ctx, `SELECT version FROM cipherd_schema`).Scan(&v); err != nil || v != SchemaVersion {
		t.Fatalf("schema version %d, %v; want %d", v, err, SchemaVersion)
	}
	if err := s.AddUsage(ctx, []cryptosvc.VersionUsage{{Key: "kept", Version: 2, Opened: 3}}); err != nil {
		t.Fatal(err)
	}
	u, err := s.Usage(ctx, "kept")
	if err != nil || len(u) != 1 || u[0].Opened != 3 || !u[0].LastUsed.IsZero() {
		t.Fatalf("usage after the upgrade: %+v, %v", u, err)
	}
	if err := s.PublishHost(ctx, "r", []byte(`{}`)); err != nil {
		t.Fatalf("host reports after the upgrade: %v", err)
	}
}

// TestLastSync: a store's LastSync moves when another replica's change
// reaches it.
func TestLastSync(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.Database(t)
	root := keystoretest.Secret(t)
	a, b := open(t, dsn, &root), open(t, dsn, &root)
	if a.LastSync().IsZero() || time.Since(a.LastSync()) > time.Minute {
		t.Fatalf("LastSync %v after Open", a.LastSync())
	}
	seen := make(chan struct{}, 1)
	defer a.Watch(func(string) {
		select {
		case seen <- struct{}{}:
		default:
		}
	})()
	before := time.Now()
	if err := b.Create(context.Background(), keystoretest.Key(t, "n", 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-seen:
	case <-time.After(5 * time.Second):
		t.Fatal("the change did not reach the other store")
	}
	if got := a.LastSync(); got.Before(before) {
		t.Fatalf("LastSync %v, not moved by the notification after %v", got, before)
	}
}
