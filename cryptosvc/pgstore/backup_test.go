package pgstore

import (
	"context"
	"reflect"
	"testing"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/pgtest"
)

// A key backed up from a memory keystore is restored into PostgreSQL under
// a backup key, and one backed up from PostgreSQL under its root key is
// restored into another database under the same root key; both hold the
// key as it was, exportable included, once the store is opened again.
func TestBackupRestore(t *testing.T) {
	srv := pgtest.Shared(t)
	ctx := context.Background()
	root, bk := keystoretest.Secret(t), keystoretest.Secret(t)
	src, err := cryptosvc.New(cryptosvc.Config{Keystore: cryptosvc.NewMemStore(), BackupKey: &bk})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.CreateKey(ctx, "k", cryptosvc.KeyConfig{Exportable: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.RotateKey(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	want, err := src.DisableKeyVersion(ctx, "k", 1)
	if err != nil {
		t.Fatal(err)
	}
	blob, _, err := src.BackupKey(ctx, "k", cryptosvc.SealedUnderBackupKey)
	if err != nil {
		t.Fatal(err)
	}

	dsn := srv.Database(t)
	pg, err := cryptosvc.New(cryptosvc.Config{Keystore: open(t, dsn, &root), BackupKey: &bk})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := pg.RestoreKey(ctx, blob, ""); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("restored %+v, %v\nwant %+v", got, err, want)
	}
	rootBlob, _, err := pg.BackupKey(ctx, "k", cryptosvc.SealedUnderRoot)
	if err != nil {
		t.Fatal(err)
	}

	other, err := cryptosvc.New(cryptosvc.Config{Keystore: open(t, srv.Database(t), &root)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.RestoreKey(ctx, rootBlob, ""); err != nil {
		t.Fatal(err)
	}
	// From the database, not memory.
	again, err := cryptosvc.New(cryptosvc.Config{Keystore: open(t, dsn, &root)})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := again.DescribeKey(ctx, "k"); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("reopened %+v, %v\nwant %+v", got, err, want)
	}
}
