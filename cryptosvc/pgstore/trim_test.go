package pgstore

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/pgtest"
)

// A trim deletes the rows of the versions it destroys, in the write that
// records it: the database keeps nothing of their material, and a store
// opened afterwards reads the key as trimmed.
func TestTrimDeletesRows(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Shared(t).Database(t)
	root := keystoretest.Secret(t)
	st := open(t, dsn, &root)
	svc, err := cryptosvc.New(cryptosvc.Config{Keystore: st})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateKey(ctx, "k", cryptosvc.KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := svc.RotateKey(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.ConfigureKey(ctx, "k", cryptosvc.KeyConfig{MinDecryptionVersion: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.TrimKey(ctx, "k", 3); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT version FROM cipherd_key_versions WHERE name = 'k' ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != 2 || versions[0] != 3 || versions[1] != 4 {
		t.Fatalf("version rows after the trim to 3: %v, want [3 4]", versions)
	}
	k := keystoretest.MustGet(t, open(t, dsn, &root), "k")
	if k.MinAvailable != 3 || k.Version(2) != nil || k.Version(3) == nil || k.Latest().Version != 4 {
		t.Fatalf("the key as a new store reads it: min available %d, versions %d…%d", k.MinAvailable, k.Versions[0].Version, k.Latest().Version)
	}
}
