package pgstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/pgtest"
)

// A token created through one store reaches the other's memory by
// notification; a deletion through the other leaves both at once for the
// deleter and by notification for the first; expired tokens are deleted
// in one statement; a store opened later loads what is left.
func TestTokensAcrossStores(t *testing.T) {
	dsn := pgtest.Shared(t).Database(t)
	root := keystoretest.Secret(t)
	a, b := open(t, dsn, &root), open(t, dsn, &root)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	mk := func(id string, ttl time.Duration) *cryptosvc.ServiceToken {
		return &cryptosvc.ServiceToken{ID: id, Hash: sha256.Sum256([]byte(id)), Name: "n", Policies: []string{"p", "q"}, Created: now, Expires: now.Add(ttl)}
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 5 s", what)
			}
		}
	}
	x, y := mk("1111111111111111", time.Hour), mk("2222222222222222", time.Minute)
	for _, tk := range []*cryptosvc.ServiceToken{x, y} {
		if err := a.CreateToken(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.CreateToken(ctx, x); !errors.Is(err, cryptosvc.ErrTokenExists) {
		t.Fatalf("the same id through the other store = %v", err)
	}
	until("b learns of both tokens", func() bool { return b.Token(x.ID) != nil && b.Token(y.ID) != nil })
	if got := b.Token(x.ID); got.Hash != x.Hash || len(got.Policies) != 2 || !got.Expires.Equal(x.Expires) {
		t.Fatalf("b holds %+v", got)
	}
	if err := b.DeleteToken(ctx, x.ID); err != nil {
		t.Fatal(err)
	}
	if b.Token(x.ID) != nil {
		t.Fatal("the deleting store still holds the token")
	}
	until("a learns of the deletion", func() bool { return a.Token(x.ID) == nil })
	if err := a.DeleteToken(ctx, x.ID); !errors.Is(err, cryptosvc.ErrTokenNotFound) {
		t.Fatalf("second delete = %v", err)
	}
	if n, err := a.DeleteExpiredTokens(ctx, y.Expires); n != 1 || err != nil {
		t.Fatalf("delete expired: %d, %v", n, err)
	}
	z := mk("3333333333333333", time.Hour)
	if err := a.CreateToken(ctx, z); err != nil {
		t.Fatal(err)
	}
	until("b learns of the expiry", func() bool { return b.Token(y.ID) == nil })
	c := open(t, dsn, &root)
	if ts := c.Tokens(); len(ts) != 1 || ts[0].ID != z.ID {
		t.Fatalf("a new store loads %d tokens", len(ts))
	}
}
