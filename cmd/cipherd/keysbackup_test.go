package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/api"
)

// A key backed up by cipherd keys backup from one server and restored by
// cipherd keys restore into another, with another data directory and so
// another root key, and the same backup key.
func TestCLIKeysBackupRestore(t *testing.T) {
	dir := t.TempDir()
	bk := filepath.Join(dir, "backup.key")
	if err := os.WriteFile(bk, []byte(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7, 1}, 16))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "cipherd.yaml")
	if err := os.WriteFile(cfg, []byte("backup_key_file: "+bk+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := []string{"CIPHERD_URL=" + startServe(t, "-config", cfg), "CIPHERD_TOKEN=" + cliToken}
	dst := []string{"CIPHERD_URL=" + startServe(t, "-config", cfg), "CIPHERD_TOKEN=" + cliToken}
	show := func(env []string, name string) api.Key {
		t.Helper()
		out, errOut, code := cipherd(t, env, "keys", "show", "-json", name)
		var k api.Key
		if err := json.Unmarshal([]byte(out), &k); code != 0 || err != nil {
			t.Fatalf("keys show %s: exit %d, %v\n%s%s", name, code, err, out, errOut)
		}
		k.Usage = nil
		return k
	}

	if out, errOut, code := cipherd(t, src, "keys", "create", "k", "--exportable"); code != 0 || !strings.Contains(out, "\nexportable: ") || !strings.Contains(out, "yes (cipherd keys backup)") {
		t.Fatalf("create --exportable: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := cipherd(t, src, "keys", "rotate", "k"); code != 0 {
		t.Fatalf("rotate: %s", errOut)
	}
	if _, errOut, code := cipherd(t, src, "keys", "backup", "default", "-o", filepath.Join(dir, "default.backup")); code != 1 || !strings.Contains(errOut, "409 key_not_exportable") {
		t.Fatalf("backup of a key not exportable: exit %d, %s", code, errOut)
	}
	if _, errOut, code := cipherd(t, src, "keys", "config", "default", "--exportable"); code != 1 || !strings.Contains(errOut, "400 invalid_config") {
		t.Fatalf("exportable set later: exit %d, %s", code, errOut)
	}

	file := filepath.Join(dir, "k.backup")
	out, errOut, code := cipherd(t, src, "keys", "backup", "k", "-o", file)
	if code != 0 || !strings.Contains(out, "sealed under backup_key") {
		t.Fatalf("backup -o: exit %d\n%s%s", code, out, errOut)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v, %v", fi, err)
	}
	if _, errOut, code := cipherd(t, src, "keys", "backup", "k", "-o", file); code != 1 {
		t.Fatalf("backup over an existing file: exit %d, %s", code, errOut)
	}
	raw := filepath.Join(dir, "k.raw")
	if _, errOut, code := cipherd(t, src, "keys", "backup", "k", "--raw", "--under", "backup_key", "-o", raw); code != 0 {
		t.Fatalf("backup --raw: %s", errOut)
	}
	// To standard output, a pipe here: the base64 alone.
	piped, errOut, code := cipherd(t, src, "keys", "backup", "k")
	if b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(piped)); code != 0 || err != nil || !bytes.HasPrefix(b, []byte("CDKB")) {
		t.Fatalf("backup to a pipe: exit %d, %v, %.100q %s", code, err, piped, errOut)
	}

	if out, errOut, code := cipherd(t, dst, "keys", "restore", "-i", file); code != 0 || !strings.Contains(out, "name:") {
		t.Fatalf("restore: exit %d\n%s%s", code, out, errOut)
	}
	if got, want := show(dst, "k"), show(src, "k"); !reflect.DeepEqual(got, want) {
		t.Errorf("restored %+v\nwant %+v", got, want)
	}
	if _, errOut, code := cipherd(t, dst, "keys", "restore", "-i", raw); code != 1 || !strings.Contains(errOut, "409 key_exists") {
		t.Fatalf("restore twice: exit %d, %s", code, errOut)
	}
	if _, errOut, code := cipherd(t, dst, "keys", "restore", "-i", raw, "--name", "k2"); code != 0 {
		t.Fatalf("restore --name: %s", errOut)
	}
	if k := show(dst, "k2"); k.LatestVersion != 2 || !k.Exportable {
		t.Errorf("restored as k2: %+v", k)
	}
	if _, errOut, code := cipherd(t, dst, "keys", "restore", "-i", cfg); code != 2 {
		t.Fatalf("restore of a file that is no backup: exit %d, %s", code, errOut)
	}
}
