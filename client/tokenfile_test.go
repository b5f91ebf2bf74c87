package client_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cipherd/cipherd/client"
	"github.com/cipherd/cipherd/server"
)

// TestClientTokenFile: WithTokenFile reads the token file for each
// request, so a token renewed in place (as the kubelet renews a projected
// service-account token: a new file renamed over the old) is sent from the
// next request on.
func TestClientTokenFile(t *testing.T) {
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	base, _ := startServerConfig(t, server.Config{
		Policies: []server.PolicyConfig{{Name: "enc", Allow: []server.RuleConfig{{Ops: []string{"encrypt"}, Keys: []string{"*"}}}}},
		Identities: []server.IdentityConfig{
			{Name: "old", TokenSHA256: sum("token-before-renewal"), Policies: []string{"enc"}},
			{Name: "new", TokenSHA256: sum("token-after-renewal")},
		},
	})
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	renew := func(content string) {
		t.Helper()
		tmp := filepath.Join(dir, "token.new")
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	c, err := client.New(base, client.WithTokenFile(file))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Encrypt(ctx, "default", []byte("x"), nil); err == nil || errors.Is(err, client.ErrUnauthenticated) {
		t.Fatalf("no token file: %v, want an error reading it, before any request", err)
	}
	renew("token-before-renewal\n")
	if _, err := c.Encrypt(ctx, "default", []byte("x"), nil); err != nil {
		t.Fatalf("the file's token: %v", err)
	}
	// "new" may not encrypt: a 403 shows that the renewed token was sent.
	renew("token-after-renewal")
	if _, err := c.Encrypt(ctx, "default", []byte("x"), nil); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("after the renewal: %v, want ErrForbidden", err)
	}
	renew(" \n")
	if _, err := c.Encrypt(ctx, "default", []byte("x"), nil); err == nil || errors.Is(err, client.ErrUnauthenticated) {
		t.Fatalf("an empty token file: %v, want an error reading it", err)
	}
	// WithToken after WithTokenFile wins, and the reverse.
	c, err = client.New(base, client.WithTokenFile(file), client.WithToken("token-before-renewal"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Encrypt(ctx, "default", []byte("x"), nil); err != nil {
		t.Fatalf("WithToken after WithTokenFile: %v", err)
	}
}
