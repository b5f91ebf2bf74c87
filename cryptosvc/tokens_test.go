package cryptosvc

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testToken(id string, created time.Time, ttl time.Duration) *ServiceToken {
	return &ServiceToken{ID: id, Hash: sha256.Sum256([]byte(id)), Name: "t-" + id[:4], Policies: []string{"p"}, Created: created, Expires: created.Add(ttl)}
}

// TestTokenStores runs the same sequence on every TokenStore of this
// package: create, refuse a second of the same id, list by creation,
// delete, refuse an unknown id, remove the expired.
func TestTokenStores(t *testing.T) {
	dir := t.TempDir()
	stores := map[string]func(t *testing.T) TokenStore{
		"mem": func(t *testing.T) TokenStore { return NewMemStore() },
		"file": func(t *testing.T) TokenStore {
			s, err := OpenFileStore(filepath.Join(dir, t.Name()), FileStoreConfig{DevRootKey: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			now := time.Now().UTC().Truncate(time.Second)
			a, b, c := testToken("aaaaaaaaaaaaaaaa", now, time.Hour), testToken("bbbbbbbbbbbbbbbb", now.Add(time.Second), time.Minute), testToken("cccccccccccccccc", now.Add(2*time.Second), time.Hour)
			for _, tk := range []*ServiceToken{a, b, c} {
				if err := s.CreateToken(ctx, tk); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.CreateToken(ctx, a); !errors.Is(err, ErrTokenExists) {
				t.Fatalf("second create = %v, want ErrTokenExists", err)
			}
			bad := testToken("ABCDEFABCDEFABCD", now, time.Hour)
			if err := s.CreateToken(ctx, bad); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("create with a bad id = %v", err)
			}
			if got := ids(s.Tokens()); got != "aaaa,bbbb,cccc" {
				t.Fatalf("tokens %s", got)
			}
			if err := s.DeleteToken(ctx, a.ID); err != nil {
				t.Fatal(err)
			}
			if s.Token(a.ID) != nil {
				t.Fatal("a deleted token is still found")
			}
			if err := s.DeleteToken(ctx, a.ID); !errors.Is(err, ErrTokenNotFound) {
				t.Fatalf("second delete = %v", err)
			}
			if err := s.CreateToken(ctx, a); !errors.Is(err, ErrTokenExists) {
				t.Fatalf("re-create of a deleted id = %v, want ErrTokenExists", err)
			}
			if n, err := s.DeleteExpiredTokens(ctx, b.Expires); n != 1 || err != nil {
				t.Fatalf("delete expired: %d, %v", n, err)
			}
			if got := ids(s.Tokens()); got != "cccc" {
				t.Fatalf("tokens after expiry %s", got)
			}
		})
	}
	// The file store kept the last state.
	s, err := OpenFileStore(filepath.Join(dir, "TestTokenStores/file"), FileStoreConfig{DevRootKey: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := ids(s.Tokens()); got != "cccc" {
		t.Fatalf("tokens after reopening %s", got)
	}
}

// TestFileStoreTokensRejected: a damaged tokens.json stops the open,
// naming the file, never quoting it.
func TestFileStoreTokensRejected(t *testing.T) {
	for name, content := range map[string]string{
		"version":  `{"v":2,"tokens":[]}`,
		"field":    `{"v":1,"tokens":[],"x":1}`,
		"trailing": `{"v":1,"tokens":[]} {}`,
		"hash":     `{"v":1,"tokens":[{"id":"aaaaaaaaaaaaaaaa","sha256":"zz","name":"n","policies":["p"],"created":"2026-01-01T00:00:00Z","expires":"2026-01-02T00:00:00Z"}]}`,
		"expiry":   `{"v":1,"tokens":[{"id":"aaaaaaaaaaaaaaaa","sha256":"` + strings.Repeat("ab", 32) + `","name":"n","policies":["p"],"created":"2026-01-02T00:00:00Z","expires":"2026-01-01T00:00:00Z"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := OpenFileStore(dir, FileStoreConfig{DevRootKey: true})
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			os.WriteFile(filepath.Join(dir, ksTokensFile), []byte(content), 0o600)
			if _, err := OpenFileStore(dir, FileStoreConfig{DevRootKey: true}); err == nil || !strings.Contains(err.Error(), ksTokensFile) {
				t.Fatalf("open = %v", err)
			}
		})
	}
}

// TestTokenSetRemovedStayRemoved: a read of the backend that began before
// a removal and ends after it does not bring the token back.
func TestTokenSetRemovedStayRemoved(t *testing.T) {
	var s TokenSet
	now := time.Now()
	a, b := testToken("aaaaaaaaaaaaaaaa", now, time.Hour), testToken("bbbbbbbbbbbbbbbb", now, time.Hour)
	s.Add(a, b)
	stale := []*ServiceToken{a, b} // read before the removal
	s.Remove(a.ID)
	s.Replace(stale)
	s.Add(a)
	if s.Token(a.ID) != nil || s.Token(b.ID) == nil || !s.Seen(a.ID) {
		t.Fatalf("after a stale read: %s", ids(s.Tokens()))
	}
	// Remembered until the token's expiry, then forgotten.
	s.now = func() time.Time { return a.Expires.Add(time.Second) }
	s.Replace(nil)
	if s.Seen(a.ID) {
		t.Fatal("a removed id is remembered past its token's expiry")
	}
}

func ids(ts []*ServiceToken) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.ID[:4])
	}
	return strings.Join(out, ",")
}
