package pgstore

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/pgtest"
)

// A root-key rotation re-wraps the storage key: a store that was open
// before it keeps writing, and a store opened after it sees every key with
// the new root key and refuses the old one. Running it again changes
// nothing, and a wrong current root key changes nothing either.
func TestRotateRootKey(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.Database(t)
	ctx := context.Background()
	oldRoot, newRoot, stranger := keystoretest.Secret(t), keystoretest.Secret(t), keystoretest.Secret(t)
	static := func(s *cryptosvc.Secret) cryptosvc.RootKeyProvider {
		p, err := cryptosvc.NewStaticRootKey(s, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	from, to := static(&oldRoot), static(&newRoot)

	running := open(t, dsn, &oldRoot)
	a := keystoretest.Key(t, "a", 2)
	if err := running.Create(ctx, a); err != nil {
		t.Fatal(err)
	}

	if _, _, err := RotateRootKey(ctx, dsn, static(&stranger), to); !errors.Is(err, cryptosvc.ErrRootKey) {
		t.Fatalf("rotation from a root key that is not the store's: %v, want ErrRootKey", err)
	}
	if _, err := Open(ctx, Config{DSN: dsn, RootKey: &newRoot}); !errors.Is(err, cryptosvc.ErrRootKey) {
		t.Fatalf("the failed rotation changed the store: the new root key opens it (%v)", err)
	}

	w, rotated, err := RotateRootKey(ctx, dsn, from, to)
	if err != nil || !rotated {
		t.Fatalf("rotation: rotated %v, %v", rotated, err)
	}
	if w.Generation != 1 || w.RootKey != "static" {
		t.Fatalf("wrapped storage key %+v, want generation 1 under static", w)
	}
	if _, rotated, err := RotateRootKey(ctx, dsn, from, to); err != nil || rotated {
		t.Fatalf("the same rotation again: rotated %v, %v; want a no-op", rotated, err)
	}

	// The store that was open writes on, under the same storage key.
	b := keystoretest.Key(t, "b", 1)
	if err := running.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	cur := keystoretest.MustGet(t, running, "a").Clone()
	keystoretest.AddVersion(t, cur, keystoretest.Secret(t))
	if err := running.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}

	if _, err := Open(ctx, Config{DSN: dsn, RootKey: &oldRoot}); !errors.Is(err, cryptosvc.ErrRootKey) {
		t.Fatalf("the old root key after the rotation: %v, want ErrRootKey", err)
	}
	after, err := Open(ctx, Config{DSN: dsn, RootKey: &newRoot, ReconnectMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	keystoretest.AssertKey(t, keystoretest.MustGet(t, after, "a"), cur)
	keystoretest.AssertKey(t, keystoretest.MustGet(t, after, "b"), b)

	empty := srv.Database(t)
	if _, _, err := RotateRootKey(ctx, empty, from, to); err == nil {
		t.Fatal("rotated a database that holds no keystore")
	}
}

// Replicas of one database derive one audit key, from the storage key they
// share; another database's differs.
func TestAuditKeyShared(t *testing.T) {
	srv := pgtest.Shared(t)
	root := keystoretest.Secret(t)
	dsn := srv.Database(t)
	a, b, c := open(t, dsn, &root), open(t, dsn, &root), open(t, srv.Database(t), &root)
	ka, ga, err := a.AuditKey()
	if err != nil || len(ka) != 32 {
		t.Fatalf("AuditKey: %x, %v", ka, err)
	}
	kb, gb, _ := b.AuditKey()
	kc, _, _ := c.AuditKey()
	if !bytes.Equal(ka, kb) || ga != gb {
		t.Error("two replicas of one database derive different audit keys")
	}
	if bytes.Equal(ka, kc) {
		t.Error("two databases derive one audit key")
	}
}
