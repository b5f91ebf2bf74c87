package pgstore

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// open opens a store on dsn, closed when t ends.
func open(t testing.TB, dsn string, root *cryptosvc.Secret) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{DSN: dsn, RootKey: root, ReconnectMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	srv := pgtest.Shared(t)
	type where struct {
		dsn  string
		root cryptosvc.Secret
	}
	var mu sync.Mutex
	opened := map[cryptosvc.Keystore]where{}
	keystoretest.Run(t, keystoretest.Kind{
		Name: "postgres",
		Open: func(t *testing.T, initial []*cryptosvc.StoredKey) cryptosvc.Keystore {
			w := where{dsn: srv.Database(t), root: keystoretest.Secret(t)}
			s := open(t, w.dsn, &w.root)
			mu.Lock()
			opened[s] = w
			mu.Unlock()
			return keystoretest.Fill(t, s, initial)
		},
		Peer: func(t *testing.T, s cryptosvc.Keystore) cryptosvc.Keystore {
			mu.Lock()
			w := opened[s]
			mu.Unlock()
			return open(t, w.dsn, &w.root)
		},
	})
}

// Every row holds sealed records only: no secret in any form, and a row
// copied under another key's name or version does not open.
func TestRowsSealed(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.Database(t)
	root := keystoretest.Secret(t)
	s := open(t, dsn, &root)
	ctx := context.Background()
	a, b := keystoretest.Key(t, "a", 3), keystoretest.Key(t, "b", 1)
	for _, k := range []*cryptosvc.StoredKey{a, b} {
		if err := s.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var dump bytes.Buffer
	rows, _ := conn.Query(ctx, `SELECT name || ' ' || revision || ' ' || encode(coalesce(meta, ''), 'escape') FROM cipherd_keys
		UNION ALL SELECT name || ' ' || version || ' ' || encode(sealed, 'escape') FROM cipherd_key_versions
		UNION ALL SELECT name || ' ' || encode(value, 'escape') FROM cipherd_meta`)
	for rows.Next() {
		var line string
		rows.Scan(&line)
		dump.WriteString(line + "\n")
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if !strings.Contains(dump.String(), `"nonce"`) {
		t.Fatalf("no sealed record in the dump:\n%s", dump.String())
	}
	secrets := []*cryptosvc.Secret{&root, &b.Versions[0].Secret}
	for i := range a.Versions {
		secrets = append(secrets, &a.Versions[i].Secret)
	}
	assertNoMaterial(t, dump.Bytes(), secrets...)

	// b's version 1 moved onto a's version 1: a no longer opens.
	if _, err := conn.Exec(ctx, `UPDATE cipherd_key_versions SET sealed = (SELECT sealed FROM cipherd_key_versions WHERE name = 'b' AND version = 1) WHERE name = 'a' AND version = 1`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(ctx, Config{DSN: dsn, RootKey: &root}); !errors.Is(err, cryptosvc.ErrAuthFailed) {
		t.Fatalf("Open over a moved record = %v, want ErrAuthFailed", err)
	}
	// Another root key is refused by the check record before any key.
	other := keystoretest.Secret(t)
	if _, err := Open(ctx, Config{DSN: dsn, RootKey: &other}); !errors.Is(err, cryptosvc.ErrRootKey) {
		t.Fatalf("Open with another root key = %v, want ErrRootKey", err)
	}
}

func assertNoMaterial(t *testing.T, text []byte, secrets ...*cryptosvc.Secret) {
	t.Helper()
	for i, s := range secrets {
		for _, f := range materialForms(s) {
			if bytes.Contains(text, f) {
				t.Fatalf("the database reveals secret %d", i)
			}
		}
	}
}

// The schema is created once, recorded, and a newer one is refused.
func TestSchemaVersion(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.Database(t)
	root := keystoretest.Secret(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 3 { // replicas starting together migrate once
		wg.Go(func() {
			s, err := Open(ctx, Config{DSN: dsn, RootKey: &root})
			if err != nil {
				t.Error(err)
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v, n int
	if err := conn.QueryRow(ctx, `SELECT max(version), count(*) FROM cipherd_schema`).Scan(&v, &n); err != nil {
		t.Fatal(err)
	}
	if v != SchemaVersion || n != 1 {
		t.Fatalf("cipherd_schema: version %d in %d rows, want %d in 1", v, n, SchemaVersion)
	}
	conn.Exec(ctx, `UPDATE cipherd_schema SET version = $1`, SchemaVersion+1)
	if _, err := Open(ctx, Config{DSN: dsn, RootKey: &root}); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open over a newer schema = %v", err)
	}
}

// A database whose revisions went back (a failover to a replica that
// lagged, a restore) is the truth: a write from memory's newer revision
// fails once with ErrConflict, memory takes the database's state, and the
// retry applies.
func TestDatabaseOlderThanMemory(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.Database(t)
	root := keystoretest.Secret(t)
	s := open(t, dsn, &root)
	ctx := context.Background()
	svc, err := cryptosvc.New(cryptosvc.Config{Keystore: s})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateKey(ctx, "k", cryptosvc.KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE cipherd_keys SET revision = 0 WHERE name = 'k'`); err != nil {
		t.Fatal(err)
	}
	k, err := svc.RotateKey(ctx, "k")
	if err != nil || k.Latest() != 2 {
		t.Fatalf("rotation over an older database: %+v, %v", k, err)
	}
}
