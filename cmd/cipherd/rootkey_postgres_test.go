//go:build cgo && (darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/internal/pgtest"
	"github.com/cipherd/cipherd/internal/softhsmtest"
)

// TestRootKeyPKCS11Postgres runs two replicas on one PostgreSQL keystore
// whose storage key a root key in a real SoftHSM2 token wraps: a key made
// and used through one replica opens on the other and after a restart, the
// rows hold no key material, and a replica given another root key refuses
// to start.
func TestRootKeyPKCS11Postgres(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Start(t)
	dsn := db.Database(t)
	pin := "pg-pin-" + fmt.Sprint(time.Now().UnixNano())
	tok := softhsmtest.New(t, "cipherd", pin)
	uri := tok.URI("cipherd", "cipherd-root")
	for _, u := range []string{uri, tok.URI("cipherd", "cipherd-other")} {
		if out, e, code := cipherd(t, nil, "rootkey", "init", "-uri", u); code != 0 {
			t.Fatalf("rootkey init %s: %d\n%s%s", u, code, out, e)
		}
	}
	env := []string{"CIPHERD_KEYSTORE=" + dsn, "CIPHERD_ROOT_KEY_URI=" + uri, "CIPHERD_DEFAULT_KEY=-"}

	a, err := rkStart(t, t.TempDir(), env...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := rkStart(t, t.TempDir(), env...)
	if err != nil {
		t.Fatal(err)
	}
	ca, cb := rkClient(t, a.url), rkClient(t, b.url)
	if _, err := ca.CreateKey(ctx, "orders", api.CreateKeyRequest{}); err != nil {
		t.Fatal(err)
	}
	res, err := ca.Encrypt(ctx, "orders", []byte("hello"), []byte("ctx"))
	if err != nil {
		t.Fatal(err)
	}
	var pt []byte
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if pt, err = cb.Decrypt(ctx, "orders", res.Ciphertext, []byte("ctx")); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || string(pt) != "hello" {
		t.Fatalf("the other replica: %q, %v", pt, err)
	}
	a.stop(t)
	b.stop(t)
	logs := a.output() + b.output()

	// A restart on the same token opens what was sealed.
	a, err = rkStart(t, t.TempDir(), env...)
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := rkClient(t, a.url).Decrypt(ctx, "orders", res.Ciphertext, []byte("ctx")); err != nil || string(pt) != "hello" {
		t.Fatalf("after a restart: %q, %v", pt, err)
	}
	a.stop(t)
	logs += a.output()
	rkAssertClean(t, "logs", logs, []byte(pin))

	// Another key of the token does not unwrap the database's storage key.
	other := []string{"CIPHERD_KEYSTORE=" + dsn, "CIPHERD_ROOT_KEY_URI=" + tok.URI("cipherd", "cipherd-other"), "CIPHERD_DEFAULT_KEY=-"}
	if _, err := rkStart(t, t.TempDir(), other...); err == nil || !strings.Contains(err.Error(), "does not unwrap") {
		t.Fatalf("a replica with another root key: %v, want a refusal saying it does not unwrap", err)
	}
}
