package cryptosvc

import (
	"bytes"
	"context"
	"testing"
)

// MessageSalt is the 24 bytes that follow the header (docs/FORMAT.md), a
// fresh one per message, and nil for bytes that hold no whole salt.
func TestMessageSalt(t *testing.T) {
	svc, err := New(Config{Keystore: NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := svc.CreateKey(ctx, "k", KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	a, _, err := svc.Seal(ctx, "k", []byte("same"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := svc.Seal(ctx, "k", []byte("same"), nil)
	_, n, err := ParseHeader(a)
	if err != nil {
		t.Fatal(err)
	}
	if got := MessageSalt(a); !bytes.Equal(got, a[n:n+24]) {
		t.Errorf("MessageSalt = %x, want the 24 bytes after the %d-byte header", got, n)
	}
	if bytes.Equal(MessageSalt(a), MessageSalt(b)) {
		t.Error("two messages share a salt")
	}
	for _, short := range [][]byte{a[:n+23], a[:n], a[:2], nil, []byte("not a message at all, not at all")} {
		if got := MessageSalt(short); got != nil {
			t.Errorf("MessageSalt(%d bytes) = %x, want nil", len(short), got)
		}
	}
}

// The file store's audit key is derived from its storage key: the same
// after a reopen, another for another store.
func TestFileStoreAuditKey(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	open := func(dir string) *FileStore {
		s, err := OpenFileStore(dir, FileStoreConfig{DevRootKey: true})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open(dir)
	k1, g1, err := s.AuditKey()
	if err != nil || len(k1) != 32 || g1 == 0 {
		t.Fatalf("AuditKey = %x, %d, %v", k1, g1, err)
	}
	s.Close()
	s = open(dir)
	k2, g2, _ := s.AuditKey()
	s.Close()
	o := open(other)
	k3, _, _ := o.AuditKey()
	o.Close()
	if !bytes.Equal(k1, k2) || g1 != g2 {
		t.Error("the audit key changed with a reopen")
	}
	if bytes.Equal(k1, k3) {
		t.Error("two stores derive one audit key")
	}
}
