//go:build cgo && (darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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
// to start; the root key rotated to another key of the token while two
// replicas serve under load fails no request.
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

	// Rotate the root key to the token's other key while two replicas
	// serve under load: no request fails, a key version made after the
	// rotation opens on the other replica, and the next start needs the new
	// root key.
	next := tok.URI("cipherd", "cipherd-other")
	b, err = rkStart(t, t.TempDir(), env...)
	if err != nil {
		t.Fatal(err)
	}
	ca, cb = rkClient(t, a.url), rkClient(t, b.url)
	var (
		wg      sync.WaitGroup
		stop    atomic.Bool
		done    atomic.Int64
		failed  atomic.Int64
		firstMu sync.Mutex
		first   error
	)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			enc, dec := ca, cb
			if i == 1 {
				enc, dec = cb, ca
			}
			for n := 0; !stop.Load(); n++ {
				pt := fmt.Sprintf("load %d/%d", i, n)
				r, err := enc.Encrypt(ctx, "orders", []byte(pt), []byte("ctx"))
				var got []byte
				if err == nil {
					got, err = dec.Decrypt(ctx, "orders", r.Ciphertext, []byte("ctx"))
				}
				if err == nil && string(got) != pt {
					err = fmt.Errorf("decrypted %q, want %q", got, pt)
				}
				done.Add(1)
				if err != nil {
					failed.Add(1)
					firstMu.Lock()
					if first == nil {
						first = err
					}
					firstMu.Unlock()
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	out, e, code := cipherd(t, []string{"CIPHERD_KEYSTORE=" + dsn, "CIPHERD_ROOT_KEY_URI=" + uri}, "rootkey", "rotate", "-to", next)
	if code != 0 || !strings.Contains(out, "root key rotated") {
		t.Fatalf("rootkey rotate: %d\n%s%s", code, out, e)
	}
	if out, e, code := cipherd(t, []string{"CIPHERD_KEYSTORE=" + dsn, "CIPHERD_ROOT_KEY_URI=" + uri}, "rootkey", "rotate", "-to", next); code != 0 || !strings.Contains(out, "nothing to do") {
		t.Fatalf("the same rotation again: %d\n%s%s", code, out, e)
	}
	if _, err := ca.RotateKey(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	rotated, err := ca.Encrypt(ctx, "orders", []byte("after"), []byte("ctx"))
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := cb.Decrypt(ctx, "orders", rotated.Ciphertext, []byte("ctx")); err != nil || string(pt) != "after" {
		t.Fatalf("version 2 on the other replica: %q, %v", pt, err)
	}
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if failed.Load() != 0 || done.Load() < 10 {
		t.Fatalf("%d of %d round trips failed during the rotation (first: %v)", failed.Load(), done.Load(), first)
	}
	a.stop(t)
	b.stop(t)
	logs += a.output() + b.output()

	// The new root key opens every ciphertext; the old one no longer opens
	// the database.
	c, err := rkStart(t, t.TempDir(), "CIPHERD_KEYSTORE="+dsn, "CIPHERD_ROOT_KEY_URI="+next, "CIPHERD_DEFAULT_KEY=-")
	if err != nil {
		t.Fatal(err)
	}
	cc := rkClient(t, c.url)
	for _, ct := range [][]byte{res.Ciphertext, rotated.Ciphertext} {
		if _, err := cc.Decrypt(ctx, "orders", ct, []byte("ctx")); err != nil {
			t.Fatalf("after the rotation, under the new root key: %v", err)
		}
	}
	c.stop(t)
	logs += c.output()
	rkAssertClean(t, "logs", logs, []byte(pin))
	if _, err := rkStart(t, t.TempDir(), env...); err == nil || !strings.Contains(err.Error(), "does not unwrap") {
		t.Fatalf("a replica with the old root key: %v, want a refusal saying it does not unwrap", err)
	}
}
