package server

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/cipherd/cipherd/cryptosvc"
)

// closeCounter is a keystore that counts its Close calls.
type closeCounter struct {
	*cryptosvc.MemStore
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return c.MemStore.Close() }

// TestKeystoreIsTheCallers: New refuses to start without a keystore, and
// neither a failed New nor Shutdown closes the one it was handed.
func TestKeystoreIsTheCallers(t *testing.T) {
	ctx := context.Background()
	if _, err := New(ctx, Config{DataDir: t.TempDir(), SkipBenchmark: true, Logger: zap.NewNop()}); err == nil || !strings.Contains(err.Error(), "Keystore is nil") {
		t.Fatalf("no keystore: %v", err)
	}

	store := &closeCounter{MemStore: cryptosvc.NewMemStore()}
	if _, err := New(ctx, Config{DataDir: t.TempDir(), Keystore: store, DefaultKey: "no/such name", SkipBenchmark: true, Logger: zap.NewNop()}); err == nil {
		t.Fatal("started with an invalid default key name")
	}
	s, err := New(ctx, Config{DataDir: t.TempDir(), Keystore: store, AdminToken: "t", SkipBenchmark: true, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if store.closed != 0 {
		t.Fatalf("the server closed the keystore %d times", store.closed)
	}
	if _, err := store.Get(ctx, "default"); err != nil {
		t.Fatalf("the default key after Shutdown: %v", err)
	}
}
