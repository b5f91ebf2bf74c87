package cryptosvc

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// krReplace replaces path atomically, as kubectl and most tools do: write a
// temporary file next to it, then rename it over path.
func krReplace(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func krEncode(t *testing.T, keys ...*StoredKey) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteKeyring(&buf, keys); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func krAssertNames(t *testing.T, r *Keyring, want ...string) {
	t.Helper()
	got, err := r.List(context.Background())
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("List = %q, %v; want %q", got, err, want)
	}
}

// krWaitFor polls cond until it holds or a deadline passes.
func krWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestKeyringLoad(t *testing.T) {
	secret := bytes.Repeat([]byte{0xA5}, 32)
	doc := fmt.Sprintf(`{
	  "cipherd_keyring": 1,
	  "keys": [
	    {
	      "name": "orders",
	      "created": "2025-01-02T15:04:05Z",
	      "config": {"min_decryption_version": 1, "allowed_aeads": ["AES-256-GCM"], "aead": "Aes-256-Gcm",
	                 "deletion_allowed": true, "rotation_period": "720h"},
	      "versions": [
	        {"version": 1, "created": "2025-01-02T15:04:05Z", "secret": %[1]q},
	        {"version": 2, "created": "2025-02-02T15:04:05+01:00", "secret": %[1]q}
	      ]
	    },
	    {"name": "bare", "created": "2025-01-02T15:04:05Z",
	     "versions": [{"version": 1, "created": "2025-01-02T15:04:05Z", "secret": %[1]q}]}
	  ]
	}`, base64.StdEncoding.EncodeToString(secret))
	path := filepath.Join(t.TempDir(), "keyring.json")
	os.WriteFile(path, []byte(doc), 0o400)
	r, err := OpenKeyring(path, KeyringConfig{PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	krAssertNames(t, r, "bare", "orders")
	k, err := r.Get(context.Background(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	// AEAD names written in any case load in the canonical one.
	want := KeyConfig{MinDecryptionVersion: 1, AllowedAEADs: []string{"aes-256-gcm"}, AEAD: "aes-256-gcm",
		DeletionAllowed: true, RotationPeriod: Duration(720 * time.Hour)}
	if !slices.Equal(k.Config.AllowedAEADs, want.AllowedAEADs) || k.Config.AEAD != want.AEAD ||
		k.Config.MinDecryptionVersion != 1 || !k.Config.DeletionAllowed || k.Config.RotationPeriod != want.RotationPeriod {
		t.Fatalf("config %+v, want %+v", k.Config, want)
	}
	if len(k.Versions) != 2 || !bytes.Equal(k.Versions[1].Secret.Expose(), secret) ||
		!k.Versions[1].Created.Equal(time.Date(2025, 2, 2, 14, 4, 5, 0, time.UTC)) {
		t.Fatalf("versions %+v", k.Versions)
	}
	if r.LastError() != nil {
		t.Fatalf("LastError = %v", r.LastError())
	}
}

func TestKeyringWriteRoundTrip(t *testing.T) {
	keys := []*StoredKey{ksTestKey(t, "zulu", 3), ksTestKey(t, "alpha", 1)}
	keys[1].Config = KeyConfig{}
	data := krEncode(t, keys...)
	if !json.Valid(data) {
		t.Fatal("WriteKeyring wrote invalid JSON")
	}
	path := filepath.Join(t.TempDir(), "keyring.json")
	os.WriteFile(path, data, 0o600)
	r, err := OpenKeyring(path, KeyringConfig{PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	krAssertNames(t, r, "alpha", "zulu")
	for _, want := range keys {
		got, _ := r.Get(context.Background(), want.Name)
		ksAssertKey(t, got, want)
	}
	// Writing what was read gives the same bytes.
	var again []*StoredKey
	for _, n := range []string{"alpha", "zulu"} {
		k, _ := r.Get(context.Background(), n)
		again = append(again, k)
	}
	if !bytes.Equal(krEncode(t, again...), data) {
		t.Fatal("WriteKeyring(OpenKeyring(WriteKeyring(keys))) differs")
	}

	// WriteKeyring refuses what OpenKeyring would refuse.
	var buf bytes.Buffer
	if err := WriteKeyring(&buf, []*StoredKey{keys[0], keys[0].Clone()}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("duplicate names: %v", err)
	}
	for _, tc := range ksInvalidKeys(t) {
		if err := WriteKeyring(&buf, []*StoredKey{tc.key}); !errors.Is(err, tc.want) {
			t.Errorf("%s: WriteKeyring = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestKeyringReload(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keyring.json")
	a, b := ksTestKey(t, "a", 1), ksTestKey(t, "b", 2)
	os.WriteFile(path, krEncode(t, a), 0o600)
	r, err := OpenKeyring(path, KeyringConfig{PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	held, _ := r.Get(ctx, "a")

	a2 := a.Clone()
	ksAddVersion(t, a2, ksTestSecret(t))
	krReplace(t, path, krEncode(t, a2, b))
	krAssertNames(t, r, "a") // no poller: nothing changes until Reload
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	krAssertNames(t, r, "a", "b")
	got, _ := r.Get(ctx, "a")
	ksAssertKey(t, got, a2)
	ksAssertKey(t, held, a) // a key handed out earlier is never modified

	krReplace(t, path, krEncode(t, b)) // a key removed from the file goes
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	krAssertNames(t, r, "b")
	if _, err := r.Get(ctx, "a"); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("Get(a) = %v", err)
	}
	if err := r.Reload(); err != nil { // unchanged file
		t.Fatal(err)
	}
	r.Close()
	if err := r.Reload(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reload after Close = %v", err)
	}
}

// TestKeyringPolling mounts the keyring as Kubernetes mounts a Secret:
// dir/keyring.json -> ..data/keyring.json, ..data -> ..<timestamp>, and an
// update swaps the ..data symlink.
func TestKeyringPolling(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	mount := func(n int, data []byte) {
		ts := filepath.Join(dir, fmt.Sprintf("..2025_01_0%d", n))
		os.Mkdir(ts, 0o755)
		os.WriteFile(filepath.Join(ts, "keyring.json"), data, 0o644)
		os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data_tmp"))
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	a, b := ksTestKey(t, "a", 1), ksTestKey(t, "b", 1)
	mount(1, krEncode(t, a))
	path := filepath.Join(dir, "keyring.json")
	if err := os.Symlink(filepath.Join("..data", "keyring.json"), path); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	r, err := OpenKeyring(path, KeyringConfig{PollInterval: 20 * time.Millisecond, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	krAssertNames(t, r, "a")

	mount(2, krEncode(t, a, b))
	krWaitFor(t, "the poller to load b", func() bool { _, err := r.Get(ctx, "b"); return err == nil })
	got, _ := r.Get(ctx, "b")
	ksAssertKey(t, got, b)
	krWaitFor(t, "the reload log", func() bool { return logs.FilterMessage("keyring reloaded").Len() == 1 })

	// An invalid update is logged once and reported; the keys stay.
	bad := bytes.Replace(krEncode(t, b), []byte(`"versions"`), []byte(`"versionz"`), 1)
	mount(3, bad)
	krWaitFor(t, "LastError", func() bool { return r.LastError() != nil })
	krAssertNames(t, r, "a", "b")
	time.Sleep(100 * time.Millisecond) // several more polls of the same bad file
	if n := logs.FilterMessageSnippet("keyring rejected").Len(); n != 1 {
		t.Fatalf("%d rejection logs for one bad file, want 1", n)
	}
	for _, e := range logs.All() {
		out, _ := json.Marshal(e.ContextMap())
		ksAssertNoMaterial(t, "log "+e.Message, append([]byte(e.Message), out...),
			&a.Versions[0].Secret, &b.Versions[0].Secret)
	}

	// Fixing the file clears the error.
	mount(4, krEncode(t, b))
	krWaitFor(t, "the fix", func() bool {
		names, _ := r.List(ctx)
		return slices.Equal(names, []string{"b"}) && r.LastError() == nil
	})

	// An in-place rewrite (not how Kubernetes updates, but editors do) is
	// seen too, even within the file system's timestamp granularity.
	target := filepath.Join(dir, "..2025_01_04", "keyring.json")
	if err := os.WriteFile(target, krEncode(t, a, b), 0o644); err != nil {
		t.Fatal(err)
	}
	krWaitFor(t, "the in-place rewrite", func() bool { _, err := r.Get(ctx, "a"); return err == nil })

	r.Close()
	if _, err := r.Get(ctx, "a"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close = %v", err)
	}
}

func TestKeyringInvalidKeepsOld(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keyring.json")
	good := ksTestKey(t, "good", 2)
	valid := krEncode(t, good)
	os.WriteFile(path, valid, 0o600)
	r, err := OpenKeyring(path, KeyringConfig{PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	for name, tc := range krInvalidDocs(t, good) {
		krReplace(t, path, tc.data)
		err := r.Reload()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Reload = %v, want %v", name, err, tc.want)
		}
		if err == nil || r.LastError() == nil || r.LastError().Error() != err.Error() {
			t.Errorf("%s: LastError = %v, Reload = %v", name, r.LastError(), err)
		}
		if err != nil {
			ksAssertNoMaterial(t, name+" error", []byte(err.Error()), &good.Versions[0].Secret, &good.Versions[1].Secret)
			if !strings.Contains(err.Error(), path) {
				t.Errorf("%s: the error does not name the file: %v", name, err)
			}
		}
		got, err := r.Get(ctx, "good")
		if err != nil {
			t.Fatalf("%s: the previous keys were dropped: %v", name, err)
		}
		ksAssertKey(t, got, good)
		krAssertNames(t, r, "good")

		// The same document is refused by OpenKeyring.
		if _, err := OpenKeyring(path, KeyringConfig{PollInterval: -1}); !errors.Is(err, tc.want) {
			t.Errorf("%s: OpenKeyring = %v, want %v", name, err, tc.want)
		}
	}
	krReplace(t, path, valid)
	if err := r.Reload(); err != nil || r.LastError() != nil {
		t.Fatalf("valid again: %v, LastError %v", err, r.LastError())
	}
	os.Remove(path)
	if err := r.Reload(); err == nil || r.LastError() == nil {
		t.Fatal("a missing file reloads")
	}
	krAssertNames(t, r, "good")
}

type krInvalidDoc struct {
	data []byte
	want error
}

// krInvalidDocs are keyrings a reader must reject, by name; good has two
// versions.
func krInvalidDocs(t *testing.T, good *StoredKey) map[string]krInvalidDoc {
	valid := krEncode(t, good)
	var doc map[string]any
	if err := json.Unmarshal(valid, &doc); err != nil {
		t.Fatal(err)
	}
	edit := func(f func(doc map[string]any, key map[string]any)) []byte {
		var d map[string]any
		json.Unmarshal(valid, &d)
		f(d, d["keys"].([]any)[0].(map[string]any))
		b, _ := json.Marshal(d)
		return b
	}
	secret := base64.StdEncoding.EncodeToString(good.Versions[0].Secret.Expose())
	return map[string]krInvalidDoc{
		"not JSON":                {[]byte("cipherd"), ErrInvalidConfig},
		"empty":                   {nil, ErrInvalidConfig},
		"truncated":               {valid[:len(valid)/2], ErrInvalidConfig},
		"trailing data":           {append(bytes.Clone(valid), `{}`...), ErrInvalidConfig},
		"two objects":             {append(bytes.Clone(valid), valid...), ErrInvalidConfig},
		"array":                   {[]byte(`[]`), ErrInvalidConfig},
		"no version":              {edit(func(d, _ map[string]any) { delete(d, "cipherd_keyring") }), ErrInvalidConfig},
		"version 3":               {edit(func(d, _ map[string]any) { d["cipherd_keyring"] = 3 }), ErrUnsupported},
		"unknown top-level field": {edit(func(d, _ map[string]any) { d["comment"] = "x" }), ErrInvalidConfig},
		"unknown key field":       {edit(func(_, k map[string]any) { k["material"] = secret }), ErrInvalidConfig},
		"unknown config field": {edit(func(_, k map[string]any) {
			k["config"].(map[string]any)["min_decrypt_version"] = 1
		}), ErrInvalidConfig},
		"unknown version field": {edit(func(_, k map[string]any) {
			k["versions"].([]any)[0].(map[string]any)["secert"] = secret
		}), ErrInvalidConfig},
		"duplicate names": {edit(func(d, k map[string]any) { d["keys"] = []any{k, k} }), ErrInvalidConfig},
		"bad name":        {edit(func(_, k map[string]any) { k["name"] = "../etc" }), ErrInvalidKeyName},
		"no versions":     {edit(func(_, k map[string]any) { k["versions"] = []any{} }), ErrInvalidConfig},
		"versions out of order": {edit(func(_, k map[string]any) {
			v := k["versions"].([]any)
			v[0], v[1] = v[1], v[0]
		}), ErrInvalidConfig},
		"short secret": {edit(func(_, k map[string]any) {
			k["versions"].([]any)[0].(map[string]any)["secret"] = secret[:20]
		}), ErrInvalidConfig},
		"secret not base64": {edit(func(_, k map[string]any) {
			k["versions"].([]any)[0].(map[string]any)["secret"] = "*" + secret[1:]
		}), ErrInvalidConfig},
		"secret not a string": {edit(func(_, k map[string]any) {
			k["versions"].([]any)[0].(map[string]any)["secret"] = 7
		}), ErrInvalidConfig},
		// The syntax error sits inside the material: it must not be quoted.
		"syntax error in secret": {bytes.Replace(valid, []byte(`"`+secret+`"`), []byte(secret), 1), ErrInvalidConfig},
		"bad config": {edit(func(_, k map[string]any) {
			k["config"].(map[string]any)["min_decryption_version"] = 3
		}), ErrInvalidConfig},
		"bad duration": {edit(func(_, k map[string]any) { k["config"].(map[string]any)["rotation_period"] = "soon" }), ErrInvalidConfig},
	}
}

func TestKeyringUnknownField(t *testing.T) {
	good := ksTestKey(t, "good", 2)
	path := filepath.Join(t.TempDir(), "keyring.json")
	for _, name := range []string{"unknown top-level field", "unknown key field", "unknown config field", "unknown version field"} {
		os.WriteFile(path, krInvalidDocs(t, good)[name].data, 0o600)
		_, err := OpenKeyring(path, KeyringConfig{})
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestKeyringDuplicateNames(t *testing.T) {
	a := ksTestKey(t, "a", 2)
	path := filepath.Join(t.TempDir(), "keyring.json")
	os.WriteFile(path, krInvalidDocs(t, a)["duplicate names"].data, 0o600)
	_, err := OpenKeyring(path, KeyringConfig{})
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("OpenKeyring = %v", err)
	}
}

func TestKeyringConcurrentReload(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keyring.json")
	sets := [][]*StoredKey{{ksTestKey(t, "a", 1)}, {ksTestKey(t, "a", 2), ksTestKey(t, "b", 1)}}
	os.WriteFile(path, krEncode(t, sets[0]...), 0o600)
	r, err := OpenKeyring(path, KeyringConfig{PollInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				k, err := r.Get(ctx, "a")
				if err != nil || k.Validate() != nil {
					t.Errorf("Get(a) during reloads: %v", err)
					return
				}
				r.List(ctx)
			}
		})
	}
	for i := range 40 {
		krReplace(t, path, krEncode(t, sets[i%2]...))
		if i%3 == 0 {
			if err := r.Reload(); err != nil {
				t.Error(err)
			}
		}
	}
	close(stop)
	wg.Wait()
}

func TestReadKeyring(t *testing.T) {
	keys := []*StoredKey{ksTestKey(t, "zulu", 3), ksTestKey(t, "alpha", 2)}
	got, err := ReadKeyring(bytes.NewReader(krEncode(t, keys...)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "alpha" || got[1].Name != "zulu" {
		t.Fatalf("ReadKeyring returned %d keys, not alpha and zulu in order", len(got))
	}
	ksAssertKey(t, got[0], keys[1])
	ksAssertKey(t, got[1], keys[0])

	// It refuses exactly what OpenKeyring refuses.
	for name, tc := range krInvalidDocs(t, keys[1]) {
		if _, err := ReadKeyring(bytes.NewReader(tc.data)); !errors.Is(err, tc.want) {
			t.Errorf("%s: ReadKeyring = %v, want %v", name, err, tc.want)
		}
	}
	big := io.MultiReader(strings.NewReader(`{"cipherd_keyring": 1, "keys": [] `), strings.NewReader(strings.Repeat(" ", krMaxFileSize)), strings.NewReader("}"))
	if _, err := ReadKeyring(big); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("oversized keyring: %v", err)
	}
}

// A reload tells the watchers which keys it added, changed or removed;
// an unchanged key keeps its revision.
func TestKeyringWatch(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keyring.json")
	a, b, same := ksTestKey(t, "a", 1), ksTestKey(t, "b", 1), ksTestKey(t, "same", 2)
	os.WriteFile(path, krEncode(t, a, b, same), 0o600)
	r, err := OpenKeyring(path, KeyringConfig{PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	before, _ := r.Get(ctx, "same")
	var mu sync.Mutex
	var got []string
	r.Watch(func(name string) { mu.Lock(); got = append(got, name); mu.Unlock() })

	ksAddVersion(t, a, ksTestSecret(t))
	krReplace(t, path, krEncode(t, a, same, ksTestKey(t, "c", 1)))
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	slices.Sort(got)
	names := slices.Clone(got)
	mu.Unlock()
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Fatalf("notified %q, want a, b, c", names)
	}
	after, _ := r.Get(ctx, "same")
	if after.Revision != before.Revision {
		t.Errorf("an unchanged key's revision went from %d to %d", before.Revision, after.Revision)
	}
	if ka, _ := r.Get(ctx, "a"); ka.Revision == before.Revision || len(ka.Versions) != 2 {
		t.Errorf("a: revision %d, %d versions", ka.Revision, len(ka.Versions))
	}
}
