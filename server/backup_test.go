package server

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

const tokEverything = "tok-everything-0123456789abcdef"

// startBackupServer starts a server over a file keystore of its own under
// root, with backup key bk (nil: none), and an identity "ops" whose policy
// allows "*" on every key.
func startBackupServer(t *testing.T, root, bk *cryptosvc.Secret) *testServer {
	t.Helper()
	dir := t.TempDir()
	st, err := cryptosvc.OpenFileStore(filepath.Join(dir, "keys"), cryptosvc.FileStoreConfig{RootKey: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after the server's Shutdown: cleanups run last first
	return startTestServer(t, Config{DataDir: dir, Keystore: st, BackupKey: bk, SkipBenchmark: true,
		Policies:   []PolicyConfig{{Name: "all", Allow: []RuleConfig{{Ops: []string{"*"}, Keys: []string{"*"}}}}},
		Identities: []IdentityConfig{{Name: "ops", TokenSHA256: tokenSHA256(tokEverything), Policies: []string{"all"}}},
	})
}

func testSecret(t *testing.T) cryptosvc.Secret {
	t.Helper()
	s, err := cryptosvc.GenerateSecret(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (ts *testServer) backup(t *testing.T, key, query string, code int, want api.Code) *api.KeyBackup {
	t.Helper()
	got, b, h := ts.do(t, "POST", "/v1/keys/"+key+"/backup"+query, "", nil, "")
	checkReply(t, "backup "+key+query, got, b, code, want)
	if got != 200 {
		return nil
	}
	if cc := h.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("backup: Cache-Control %q", cc)
	}
	var kb api.KeyBackup
	if err := json.Unmarshal(b, &kb); err != nil {
		t.Fatal(err)
	}
	return &kb
}

func (ts *testServer) restore(t *testing.T, key string, backup []byte, code int, want api.Code) {
	t.Helper()
	body, _ := json.Marshal(api.RestoreKeyRequest{Backup: backup})
	got, b, _ := ts.do(t, "POST", "/v1/keys/"+key+"/restore", api.ContentTypeJSON, bytes.NewReader(body), "")
	checkReply(t, "restore "+key, got, b, code, want)
}

func (ts *testServer) sealJSON(t *testing.T, key, plaintext string) []byte {
	t.Helper()
	var r api.EncryptResult
	if code := ts.postJSON(t, "/v1/encrypt/"+key, api.EncryptRequest{EncryptItem: api.EncryptItem{Plaintext: []byte(plaintext)}}, &r); code != 200 {
		t.Fatalf("encrypt under %s: %d", key, code)
	}
	return r.Ciphertext
}

func (ts *testServer) openJSON(t *testing.T, key string, ct []byte) string {
	t.Helper()
	var r api.DecryptResult
	if code := ts.postJSON(t, "/v1/decrypt/"+key, api.DecryptRequest{DecryptItem: api.DecryptItem{Ciphertext: ct}}, &r); code != 200 {
		t.Fatalf("decrypt under %s: %d", key, code)
	}
	return string(r.Plaintext)
}

// TestKeyBackupRestore backs a key up from one server and restores it
// into another fleet (another root key, the same backup key) and into
// another keystore under the same root key, where every version opens
// what it sealed before the backup.
func TestKeyBackupRestore(t *testing.T) {
	rootA, rootB, bk := testSecret(t), testSecret(t), testSecret(t)
	src := startBackupServer(t, &rootA, &bk)

	// Exportable is set at creation only.
	if code := src.postJSON(t, "/v1/keys/plain", api.CreateKeyRequest{}, nil); code != 201 {
		t.Fatalf("create plain: %d", code)
	}
	got, b, _ := src.do(t, "PUT", "/v1/keys/plain/config", api.ContentTypeJSON, strings.NewReader(`{"exportable":true}`), "")
	checkReply(t, "exportable set later", got, b, 400, api.CodeInvalidConfig)
	src.backup(t, "plain", "", 409, api.CodeKeyNotExportable)

	var k api.Key
	if code := src.postJSON(t, "/v1/keys/k", api.CreateKeyRequest{KeyConfig: api.KeyConfig{Exportable: true}}, &k); code != 201 || !k.Exportable {
		t.Fatalf("create k: %d %+v", code, k)
	}
	msgs := map[string][]byte{"one": src.sealJSON(t, "k", "one")}
	if code, b, _ := src.do(t, "POST", "/v1/keys/k/rotate", "", nil, ""); code != 200 {
		t.Fatalf("rotate: %d %s", code, b)
	}
	msgs["two"] = src.sealJSON(t, "k", "two")

	// "*" does not grant keys-backup.
	got, b, _ = src.do(t, "POST", "/v1/keys/k/backup", "", nil, tokEverything)
	checkReply(t, "backup by a * identity", got, b, 403, api.CodeForbidden)
	got, b, _ = src.do(t, "POST", "/v1/keys/k2/restore", api.ContentTypeJSON, strings.NewReader(`{"backup":"Q0RLQg=="}`), tokEverything)
	checkReply(t, "restore by a * identity", got, b, 403, api.CodeForbidden)

	byKey := src.backup(t, "k", "", 200, "")
	if byKey.SealedUnder != api.SealedUnderBackupKey || byKey.Key != "k" || len(byKey.Versions) != 2 {
		t.Fatalf("default backup: %+v", byKey)
	}
	byRoot := src.backup(t, "k", "?under=root", 200, "")
	if byRoot.SealedUnder != api.SealedUnderRoot {
		t.Fatalf("root backup: %+v", byRoot)
	}
	src.backup(t, "k", "?under=hsm", 400, api.CodeInvalidParameter)

	// Another fleet: another root key and data directory, the same backup key.
	other := startBackupServer(t, &rootB, &bk)
	other.restore(t, "k", byKey.Backup, 201, "")
	for want, ct := range msgs {
		if pt := other.openJSON(t, "k", ct); pt != want {
			t.Errorf("restored key opened %q, want %q", pt, want)
		}
	}
	other.restore(t, "k", byKey.Backup, 409, api.CodeKeyExists)
	other.restore(t, "k-root", byRoot.Backup, 400, api.CodeInvalidBackup) // another root key
	other.restore(t, "k-cut", byKey.Backup[:len(byKey.Backup)-1], 400, api.CodeInvalidBackup)
	tampered := bytes.Clone(byKey.Backup)
	tampered[len(tampered)/2] ^= 1
	other.restore(t, "k-tampered", tampered, 400, api.CodeInvalidBackup)
	wrong := testSecret(t)
	startBackupServer(t, &rootB, &wrong).restore(t, "k", byKey.Backup, 400, api.CodeInvalidBackup)
	other.restore(t, "k-empty", nil, 400, api.CodeInvalidBackup)

	// Another keystore under the same root key, without a backup key.
	same := startBackupServer(t, &rootA, nil)
	same.restore(t, "k", byKey.Backup, 400, api.CodeBackupKeyNotConfigured)
	same.restore(t, "k", byRoot.Backup, 201, "")
	for want, ct := range msgs {
		if pt := same.openJSON(t, "k", ct); pt != want {
			t.Errorf("restored key opened %q, want %q", pt, want)
		}
	}
	same.backup(t, "k", "?under=backup_key", 400, api.CodeBackupKeyNotConfigured)
	if kb := same.backup(t, "k", "", 200, ""); kb.SealedUnder != api.SealedUnderRoot {
		t.Fatalf("default without a backup key: %+v", kb)
	}

	// Both are in the audit trail, refusals too, with the key's name only.
	find := func(ts *testServer, action, key, outcome string) {
		t.Helper()
		for _, r := range auditRecords(t, filepath.Join(ts.cfg.DataDir, "audit.log")) {
			if r["op"] == "keys-backup" && r["action"] == action && r["key"] == key && r["outcome"] == outcome {
				return
			}
		}
		t.Errorf("no audit record of %s %s with outcome %s", action, key, outcome)
	}
	find(src, "backup", "k", "ok")
	find(src, "backup", "plain", "error")
	find(other, "restore", "k", "ok")
	find(other, "restore", "k-tampered", "error")
	find(same, "restore", "k", "ok")
}
