package cryptosvc

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestKeyringLastSync: LastSync moves with every load that leaves the file
// in service, and stays while the file does not load.
func TestKeyringLastSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keyring.json")
	a := ksTestKey(t, "a", 1)
	os.WriteFile(path, krEncode(t, a), 0o600)
	before := time.Now()
	r, err := OpenKeyring(path, KeyringConfig{PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	opened := r.LastSync()
	if opened.Before(before) || opened.After(time.Now()) {
		t.Fatalf("LastSync %v after an open between %v and now", opened, before)
	}

	krReplace(t, path, []byte("{broken"))
	if err := r.Reload(); err == nil {
		t.Fatal("a broken keyring loaded")
	}
	if got := r.LastSync(); !got.Equal(opened) {
		t.Fatalf("LastSync moved to %v on a failed load", got)
	}
	krReplace(t, path, krEncode(t, a))
	before = time.Now()
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := r.LastSync(); got.Before(before) {
		t.Fatalf("LastSync %v, not moved by the load at %v", got, before)
	}
}
