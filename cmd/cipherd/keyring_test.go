package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/cryptosvc"
)

// readKeyringFile reads path with the service's own parser.
func readKeyringFile(t *testing.T, path string) map[string]*cryptosvc.StoredKey {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys, err := cryptosvc.ReadKeyring(f)
	if err != nil {
		t.Fatalf("the service refuses the keyring: %v", err)
	}
	m := map[string]*cryptosvc.StoredKey{}
	for _, k := range keys {
		m[k.Name] = k
	}
	return m
}

// assertOnlyFile checks that dir holds the keyring and nothing a write left.
func assertOnlyFile(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "keyring.json" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("directory holds %v, want only keyring.json", names)
	}
}

func TestKeyringCommand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keyring.json")

	out, errOut, code := cipherd(t, nil, "keyring", "new", "-o", path, "orders", "default")
	if code != 0 {
		t.Fatalf("new: exit %d\n%s%s", code, out, errOut)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	assertOnlyFile(t, dir)
	keys := readKeyringFile(t, path)
	if len(keys) != 2 || len(keys["orders"].Versions) != 1 || len(keys["default"].Versions) != 1 {
		t.Fatalf("new made %d keys, want orders and default at version 1", len(keys))
	}
	if keys["orders"].Versions[0].Secret.Equal(&keys["default"].Versions[0].Secret) {
		t.Fatal("two keys share their material")
	}

	for i := 0; i < 2; i++ {
		if out, errOut, code := cipherd(t, nil, "keyring", "rotate", "-f", path, "orders"); code != 0 || !strings.Contains(out, "orders at version") {
			t.Fatalf("rotate: exit %d\n%s%s", code, out, errOut)
		}
	}
	if out, errOut, code := cipherd(t, nil, "keyring", "add", "-f", path, "audit"); code != 0 {
		t.Fatalf("add: exit %d\n%s%s", code, out, errOut)
	}
	assertOnlyFile(t, dir)
	after := readKeyringFile(t, path)
	orders := after["orders"]
	if len(orders.Versions) != 3 || len(after["default"].Versions) != 1 || len(after["audit"].Versions) != 1 {
		t.Fatalf("after two rotations and an add: %d keys, orders at %d versions", len(after), len(orders.Versions))
	}
	if !orders.Versions[0].Secret.Equal(&keys["orders"].Versions[0].Secret) || !after["default"].Versions[0].Secret.Equal(&keys["default"].Versions[0].Secret) {
		t.Fatal("rotation changed existing material")
	}
	if orders.Versions[1].Secret.Equal(&orders.Versions[0].Secret) || orders.Versions[2].Secret.Equal(&orders.Versions[1].Secret) {
		t.Fatal("a rotation reused material")
	}

	// list shows names, versions and dates, never material.
	var secrets []string
	for _, k := range after {
		for _, v := range k.Versions {
			secrets = append(secrets, base64.StdEncoding.EncodeToString(v.Secret.Expose()))
		}
	}
	out, errOut, code = cipherd(t, nil, "keyring", "list", "-f", path)
	if code != 0 {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1+5 || !strings.HasPrefix(lines[0], "KEY") {
		t.Fatalf("list printed:\n%s", out)
	}
	for _, want := range []string{"audit    1", "orders   2", "orders   3"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	jsonOut, _, code := cipherd(t, nil, "keyring", "list", "-json", "-f", path)
	var described []cryptosvc.Key
	if code != 0 || json.Unmarshal([]byte(jsonOut), &described) != nil || len(described) != 3 || described[2].Name != "orders" || described[2].Latest() != 3 {
		t.Fatalf("list -json: exit %d\n%s", code, jsonOut)
	}
	for _, s := range secrets {
		if strings.Contains(out+errOut+jsonOut, s) {
			t.Fatal("list printed key material")
		}
	}

	// Refusals leave the file as it was.
	before, _ := os.ReadFile(path)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"new", "-o", path, "x"}, 1},              // exists
		{[]string{"rotate", "-f", path, "missing"}, 1},     // no such key
		{[]string{"add", "-f", path, "orders"}, 1},         // exists
		{[]string{"add", "-f", path, "../x"}, 2},           // bad name
		{[]string{"rotate", "-f", path, "a", "a"}, 2},      // named twice
		{[]string{"rotate", "-f", path}, 2},                // no key
		{[]string{"rotate", "orders"}, 2},                  // no file
		{[]string{"list", "-f", path, "extra"}, 2},         // stray argument
		{[]string{"shred", "-f", path}, 2},                 // unknown command
		{[]string{"rotate", "-f", path + ".none", "x"}, 1}, // no file
	} {
		out, errOut, code := cipherd(t, nil, append([]string{"keyring"}, tc.args...)...)
		if code != tc.code || errOut == "" {
			t.Errorf("keyring %v: exit %d, want %d\n%s%s", tc.args, code, tc.code, out, errOut)
		}
		if now, _ := os.ReadFile(path); !bytes.Equal(now, before) {
			t.Fatalf("keyring %v changed the file", tc.args)
		}
	}
	assertOnlyFile(t, dir)

	// A keyring the service would refuse is not edited.
	bad := filepath.Join(t.TempDir(), "keyring.json")
	os.WriteFile(bad, bytes.Replace(before, []byte(`"cipherd_keyring": 1`), []byte(`"cipherd_keyring": 2`), 1), 0o600)
	corrupt, _ := os.ReadFile(bad)
	if _, errOut, code := cipherd(t, nil, "keyring", "rotate", "-f", bad, "orders"); code != 1 || !strings.Contains(errOut, "version 2") {
		t.Fatalf("rotate of an unsupported keyring: exit %d\n%s", code, errOut)
	}
	if now, _ := os.ReadFile(bad); !bytes.Equal(now, corrupt) {
		t.Fatal("rotate rewrote a keyring it could not read")
	}

	// A symbolic link (a mounted Secret's layout) is not replaced by a file.
	link := filepath.Join(t.TempDir(), "keyring.json")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := cipherd(t, nil, "keyring", "rotate", "-f", link, "orders"); code != 1 || !strings.Contains(errOut, "not a regular file") {
		t.Fatalf("rotate through a symlink: exit %d\n%s", code, errOut)
	}
}
