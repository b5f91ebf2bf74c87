package pgstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/pgtest"
)

// BenchmarkSeal64 seals 64 bytes through a Service over the file store and
// over the PostgreSQL store: the data path reads the key from memory in
// both, and the PostgreSQL store must cost no more. With -count, the two
// sub-benchmarks alternate, so that their ratio is taken in one run.
func BenchmarkSeal64(b *testing.B) {
	ctx := context.Background()
	root := keystoretest.Secret(b)
	fs, err := cryptosvc.OpenFileStore(b.TempDir(), cryptosvc.FileStoreConfig{RootKey: &root})
	if err != nil {
		b.Fatal(err)
	}
	defer fs.Close()
	pg := open(b, pgtest.Shared(b).Database(b), &root)
	pt := make([]byte, 64)
	for _, st := range []struct {
		name  string
		store cryptosvc.Keystore
	}{{"file", fs}, {"postgres", pg}} {
		svc, err := cryptosvc.New(cryptosvc.Config{Keystore: st.store})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := svc.CreateKey(ctx, "k", cryptosvc.KeyConfig{}); err != nil {
			b.Fatal(err)
		}
		b.Run(st.name, func(b *testing.B) {
			b.SetBytes(64)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := svc.Seal(ctx, "k", pt, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadOnMiss reads a key of three versions from the database, as
// a decryption does under a version that has not reached memory yet: one
// pooled connection, pinged (see Open), and one query.
func BenchmarkReadOnMiss(b *testing.B) {
	ctx := context.Background()
	st, svc := benchService(b)
	if _, err := svc.CreateKey(ctx, "k", cryptosvc.KeyConfig{}); err != nil {
		b.Fatal(err)
	}
	for range 2 {
		if _, err := svc.RotateKey(ctx, "k"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := st.Refresh(ctx, "k", nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRotate rotates a key through a Service: one pooled connection,
// pinged, and one transaction.
func BenchmarkRotate(b *testing.B) {
	ctx := context.Background()
	_, svc := benchService(b)
	// A key per 1000 rotations, so that a long run does not measure a key
	// of ever more versions.
	var n int
	name := func() string { return fmt.Sprintf("k%d", n/1000) }
	b.ReportAllocs()
	for b.Loop() {
		if n%1000 == 0 {
			if _, err := svc.CreateKey(ctx, name(), cryptosvc.KeyConfig{}); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := svc.RotateKey(ctx, name()); err != nil {
			b.Fatal(err)
		}
		n++
	}
}

// benchService opens a store on a new database of the shared cluster and a
// Service over it.
func benchService(b *testing.B) (*Store, *cryptosvc.Service) {
	root := keystoretest.Secret(b)
	st := open(b, pgtest.Shared(b).Database(b), &root)
	svc, err := cryptosvc.New(cryptosvc.Config{Keystore: st})
	if err != nil {
		b.Fatal(err)
	}
	return st, svc
}
