package pgstore

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/chacha20poly1305"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/pgtest"
)

// TestStorageFormatsByHand reads what the PostgreSQL store and the file
// store wrote, and what WriteKeyring wrote, by following docs/STORAGE.md
// with nothing but the standard library and x/crypto: no cipherd code
// opens anything here.
func TestStorageFormatsByHand(t *testing.T) {
	ctx := context.Background()
	rootSecret := keystoretest.Secret(t)
	root := rootSecret.Expose()
	k := keystoretest.Key(t, "orders", 3)
	k.Config.AEAD = "aes-256-gcm"
	k.Config.AllowedAEADs = []string{"aes-256-gcm"}

	// PostgreSQL.
	dsn := pgtest.Shared(t).Database(t)
	s := open(t, dsn, &rootSecret)
	if err := s.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var skJSON, meta []byte
	if err := conn.QueryRow(ctx, `SELECT value FROM cipherd_meta WHERE name = 'storage_key'`).Scan(&skJSON); err != nil {
		t.Fatal(err)
	}
	sk := handUnwrap(t, root, skJSON)
	if err := conn.QueryRow(ctx, `SELECT meta FROM cipherd_keys WHERE name = 'orders'`).Scan(&meta); err != nil {
		t.Fatal(err)
	}
	var m struct {
		Name    string         `json:"name"`
		Config  map[string]any `json:"config"`
		Created string         `json:"created"`
	}
	handJSON(t, handOpen(t, sk, meta, "pg-key", "orders"), &m)
	if m.Name != "orders" || m.Config["aead"] != "aes-256-gcm" {
		t.Fatalf("meta by hand: %+v", m)
	}
	rows, err := conn.Query(ctx, `SELECT version, sealed FROM cipherd_key_versions WHERE name = 'orders' ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var v int32
		var sealed []byte
		rows.Scan(&v, &sealed)
		var rec struct {
			Version int    `json:"version"`
			Created string `json:"created"`
			Secret  string `json:"secret"`
		}
		handJSON(t, handOpen(t, sk, sealed, "pg-version", "orders\x00"+strconv.Itoa(int(v))), &rec)
		want := k.Versions[v-1].Secret.Expose()
		if got, _ := base64.StdEncoding.DecodeString(rec.Secret); rec.Version != int(v) || !bytes.Equal(got, want) {
			t.Fatalf("version %d by hand: wrong record", v)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("%d version rows", n)
	}

	// The file store: the key file in keys/keys/ of a data directory.
	dir := filepath.Join(t.TempDir(), "keys")
	fs, err := cryptosvc.OpenFileStore(dir, cryptosvc.FileStoreConfig{RootKey: &rootSecret})
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	fs.Close()
	skFile, err := os.ReadFile(filepath.Join(dir, "storagekey.json"))
	if err != nil {
		t.Fatal(err)
	}
	fsk := handUnwrap(t, root, skFile)
	keyFile, err := os.ReadFile(filepath.Join(dir, "keys", "orders.key"))
	if err != nil {
		t.Fatal(err)
	}
	handCheckRecord(t, handOpen(t, fsk, keyFile, "key", "orders"), k)
	check, _ := os.ReadFile(filepath.Join(dir, "root.check"))
	if pt := handOpen(t, fsk, check, "check", ""); string(pt) != "cipherd keystore root key check v1" {
		t.Fatalf("root.check by hand: %q", pt)
	}

	// The keyring: the key record in clear.
	var buf bytes.Buffer
	if err := cryptosvc.WriteKeyring(&buf, []*cryptosvc.StoredKey{k}); err != nil {
		t.Fatal(err)
	}
	var kr struct {
		Version int               `json:"cipherd_keyring"`
		Keys    []json.RawMessage `json:"keys"`
	}
	handJSON(t, buf.Bytes(), &kr)
	if kr.Version != 1 || len(kr.Keys) != 1 {
		t.Fatalf("keyring by hand: %+v", kr)
	}
	handCheckRecord(t, kr.Keys[0], k)
}

// handUnwrap unwraps a storage key JSON object with a static root key.
func handUnwrap(t *testing.T, root, obj []byte) []byte {
	t.Helper()
	var w struct {
		V          int    `json:"v"`
		Generation int    `json:"generation"`
		RootKey    string `json:"root_key"`
		Wrapped    []byte `json:"wrapped"`
	}
	handJSON(t, obj, &w)
	if w.V != 2 || len(w.Wrapped) != 72 {
		t.Fatalf("storage key object: v %d, %d wrapped bytes", w.V, len(w.Wrapped))
	}
	kw, err := hkdf.Key(sha256.New, root, nil, "cipherd root key wrap v1", 32)
	if err != nil {
		t.Fatal(err)
	}
	aead, _ := chacha20poly1305.NewX(kw)
	sk, err := aead.Open(nil, w.Wrapped[:24], w.Wrapped[24:], []byte("cipherd storage key v2\x00"+strconv.Itoa(w.Generation)))
	if err != nil {
		t.Fatal("the storage key does not unwrap as documented")
	}
	return sk
}

// handOpen opens a sealed record of version 2.
func handOpen(t *testing.T, sk, record []byte, kind, name string) []byte {
	t.Helper()
	var env struct {
		V     int    `json:"v"`
		G     int    `json:"g"`
		Nonce []byte `json:"nonce"`
		CT    []byte `json:"ct"`
	}
	handJSON(t, record, &env)
	ad := "cipherd keystore v2\x00" + kind
	if name != "" {
		ad += "\x00" + name
	}
	aead, _ := chacha20poly1305.NewX(sk)
	pt, err := aead.Open(nil, env.Nonce, env.CT, []byte(ad))
	if env.V != 2 || err != nil {
		t.Fatalf("the %s record %q does not open as documented (v %d)", kind, name, env.V)
	}
	return pt
}

// handCheckRecord compares a key record's JSON with k.
func handCheckRecord(t *testing.T, rec []byte, k *cryptosvc.StoredKey) {
	t.Helper()
	var r struct {
		Name     string         `json:"name"`
		Created  string         `json:"created"`
		Config   map[string]any `json:"config"`
		Versions []struct {
			Version int    `json:"version"`
			Created string `json:"created"`
			Secret  string `json:"secret"`
		} `json:"versions"`
	}
	handJSON(t, rec, &r)
	if r.Name != k.Name || len(r.Versions) != len(k.Versions) || r.Config["rotation_period"] != "720h0m0s" {
		t.Fatalf("key record by hand: %s, %d versions, config %v", r.Name, len(r.Versions), r.Config)
	}
	for i, v := range r.Versions {
		got, _ := base64.StdEncoding.DecodeString(v.Secret)
		if v.Version != i+1 || !bytes.Equal(got, k.Versions[i].Secret.Expose()) {
			t.Fatalf("key record by hand: version %d differs", i+1)
		}
	}
}

func handJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("not the documented JSON: %v", err)
	}
}
