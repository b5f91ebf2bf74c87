package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
)

const keysTestConfig = `policies:
  - name: reader
    allow:
      - ops: [keys-read]
        keys: ["*"]
`

// A key's whole life through cipherd keys against cipherd serve: create,
// list, show, rotate, config, encrypt and decrypt (without --key), delete;
// tables and -json; the service's refusals and the usage errors.
func TestCLIKeys(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "cipherd.yaml")
	if err := os.WriteFile(cfg, []byte(keysTestConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	url := startServe(t, "-config", cfg)
	admin := []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN=" + cliToken}
	dir := t.TempDir()

	// showKey returns the key as keys show -json prints it.
	showKey := func(name string) api.Key {
		t.Helper()
		out, errOut, code := cipherd(t, admin, "keys", "show", "-json", name)
		var k api.Key
		if err := json.Unmarshal([]byte(out), &k); code != 0 || err != nil {
			t.Fatalf("keys show -json %s: exit %d, %v\n%s%s", name, code, err, out, errOut)
		}
		return k
	}

	// create, flags after the name, printed as show prints it.
	out, errOut, code := cipherd(t, admin, "keys", "create", "orders", "--allowed-aeads", "aes-256-gcm,chacha20-poly1305", "--aead", "aes-256-gcm", "--rotation-period", "720h")
	if code != 0 || !regexp.MustCompile(`(?m)^name: +orders$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^latest version: +1$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^rotation period: +720h0m0s, next after \S+Z$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^allowed aeads: +aes-256-gcm, chacha20-poly1305$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^1 +\S+Z +latest: seals new data +- +- +-$`).MatchString(out) {
		t.Fatalf("keys create orders: exit %d\n%s%s", code, out, errOut)
	}

	// create --import: the material from a file in base64, or raw from
	// standard input; never printed. Rotating to the same material is
	// refused, which shows the service got it whole.
	material := make([]byte, 32)
	rand.Read(material)
	b64 := base64.StdEncoding.EncodeToString(material)
	matFile := filepath.Join(dir, "material")
	if err := os.WriteFile(matFile, []byte(b64+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = cipherd(t, admin, "keys", "create", "-json", "--import", matFile, "legacy")
	var legacy api.Key
	if err := json.Unmarshal([]byte(out), &legacy); code != 0 || err != nil || legacy.Name != "legacy" || legacy.LatestVersion != 1 {
		t.Fatalf("keys create --import: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	if _, errOut, code := cipherd(t, admin, "keys", "rotate", "legacy", "--import", matFile); code != 1 || !strings.Contains(errOut, "400 invalid_config") {
		t.Errorf("keys rotate --import with version 1's material: exit %d: %s", code, errOut)
	}
	out, errOut, code = crypt(t, admin, bytes.NewReader(material), "keys", "create", "raw", "--import", "-")
	if code != 0 || strings.Contains(out+errOut, b64) || bytes.Contains([]byte(out+errOut), material) {
		t.Fatalf("keys create --import - with raw bytes: exit %d\n%s%s", code, out, errOut)
	}

	// list: a table, and -json.
	out, errOut, code = cipherd(t, admin, "keys", "list")
	if code != 0 || !regexp.MustCompile(`^NAME +VERSIONS +LATEST +MIN-DECRYPT +AEAD +ROTATION +CREATED\n`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^orders +1 +1 +- +aes-256-gcm +720h0m0s +\S+Z$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^default +1 +1 +- +auto +never +\S+Z$`).MatchString(out) || strings.Count(out, "\n") != 5 {
		t.Fatalf("keys list: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = cipherd(t, admin, "keys", "list", "-json")
	var list api.KeyList
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil {
		t.Fatalf("keys list -json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	var names []string
	for _, k := range list.Keys {
		names = append(names, k.Name)
	}
	slices.Sort(names)
	if strings.Join(names, " ") != "default legacy orders raw" {
		t.Errorf("keys list -json: %s", out)
	}
	if k := showKey("orders"); k.AEAD != "aes-256-gcm" || k.RotationPeriod != "720h0m0s" || len(k.Versions) != 1 ||
		strings.Join(k.AllowedAEADs, ",") != "aes-256-gcm,chacha20-poly1305" || k.DeletionAllowed {
		t.Errorf("keys show -json orders: %+v", k)
	}

	// Seal under version 1, rotate, seal under version 2; decrypt takes
	// the key from the header.
	plain, sealed1, sealed2 := filepath.Join(dir, "plain"), filepath.Join(dir, "sealed1"), filepath.Join(dir, "sealed2")
	pt := make([]byte, 100<<10+3)
	rand.Read(pt)
	if err := os.WriteFile(plain, pt, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, e, code := crypt(t, admin, nil, "encrypt", "--key", "orders", "-i", plain, "-o", sealed1); code != 0 {
		t.Fatalf("encrypt --key orders: exit %d: %s", code, e)
	}
	out, errOut, code = cipherd(t, admin, "keys", "rotate", "orders")
	if code != 0 || !regexp.MustCompile(`(?m)^latest version: +2$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^1 +\S+Z +decrypts +- +- +-\n2 +\S+Z +latest: seals new data +- +- +-\n$`).MatchString(out) {
		t.Fatalf("keys rotate orders: exit %d\n%s%s", code, out, errOut)
	}
	if _, e, code := crypt(t, admin, nil, "encrypt", "--key", "orders", "-i", plain, "-o", sealed2); code != 0 {
		t.Fatalf("encrypt --key orders after the rotation: exit %d: %s", code, e)
	}
	for _, f := range []string{sealed1, sealed2} {
		if out, e, code := crypt(t, admin, nil, "decrypt", "-i", f); code != 0 || out != string(pt) {
			t.Fatalf("decrypt -i %s: exit %d, %d bytes: %s", filepath.Base(f), code, len(out), e)
		}
	}
	// show counts each version's use: one message sealed and opened each.
	if out, errOut, code := cipherd(t, admin, "keys", "show", "orders"); code != 0 ||
		!regexp.MustCompile(`(?m)^1 +\S+Z +decrypts +1 +1 +\S+Z\n2 +\S+Z +latest: seals new data +1 +1 +\S+Z\n$`).MatchString(out) {
		t.Errorf("keys show orders after a message each way under each version: exit %d\n%s%s", code, out, errOut)
	}

	// config changes the settings given and keeps the others; an empty
	// value returns one to its default.
	out, errOut, code = cipherd(t, admin, "keys", "config", "orders", "--min-decryption-version", "2", "--deletion-allowed", "--rotation-period", "")
	if code != 0 || !regexp.MustCompile(`(?m)^min decryption version: +2 \(`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^rotation period: +never$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^1 +\S+Z +retired +- +- +-$`).MatchString(out) {
		t.Fatalf("keys config orders: exit %d\n%s%s", code, out, errOut)
	}
	if k := showKey("orders"); k.MinDecryptionVersion != 2 || !k.DeletionAllowed || k.RotationPeriod != "" || k.AEAD != "aes-256-gcm" || len(k.AllowedAEADs) != 2 {
		t.Errorf("after keys config: %+v", k)
	}
	if _, e, code := crypt(t, admin, nil, "decrypt", "-i", sealed1); code != 1 || !strings.Contains(e, "410 key_version_retired") {
		t.Errorf("decrypt of a retired version: exit %d: %s", code, e)
	}
	out, errOut, code = cipherd(t, admin, "keys", "config", "-json", "orders", "--aead", "", "--allowed-aeads", "")
	var k api.Key
	if err := json.Unmarshal([]byte(out), &k); code != 0 || err != nil || k.AEAD != "" || k.AllowedAEADs != nil || k.MinDecryptionVersion != 2 {
		t.Fatalf("keys config -json --aead '' --allowed-aeads '': exit %d, %v\n%s%s", code, err, out, errOut)
	}

	// disable and enable a version; trim the retired one, with its name
	// confirmed.
	if out, errOut, code := cipherd(t, admin, "keys", "disable", "orders", "--version", "2"); code != 0 ||
		!regexp.MustCompile(`(?m)^2 +\S+Z +disabled `).MatchString(out) {
		t.Fatalf("keys disable orders --version 2: exit %d\n%s%s", code, out, errOut)
	}
	if _, e, code := crypt(t, admin, nil, "decrypt", "-i", sealed2); code != 1 || !strings.Contains(e, "409 key_version_disabled") {
		t.Errorf("decrypt of a disabled version: exit %d: %s", code, e)
	}
	if _, errOut, code := cipherd(t, admin, "keys", "enable", "orders", "--version", "2"); code != 0 {
		t.Fatalf("keys enable orders --version 2: exit %d: %s", code, errOut)
	}
	if out, e, code := crypt(t, admin, nil, "decrypt", "-i", sealed2); code != 0 || out != string(pt) {
		t.Errorf("decrypt of a version enabled again: exit %d: %s", code, e)
	}
	if _, errOut, code := cipherd(t, admin, "keys", "trim", "orders", "--min-available-version", "2"); code != 2 || !strings.Contains(errOut, "--confirm orders") {
		t.Errorf("keys trim without --confirm: exit %d: %s", code, errOut)
	}
	if out, errOut, code := cipherd(t, admin, "keys", "trim", "orders", "--min-available-version", "2", "--confirm", "orders"); code != 0 ||
		!regexp.MustCompile(`(?m)^min available version: +2 `).MatchString(out) || regexp.MustCompile(`(?m)^1 +\S+Z `).MatchString(out) {
		t.Fatalf("keys trim orders --min-available-version 2: exit %d\n%s%s", code, out, errOut)
	}
	if _, e, code := crypt(t, admin, nil, "decrypt", "-i", sealed1); code != 1 || !strings.Contains(e, "409 key_version_destroyed") {
		t.Errorf("decrypt of a destroyed version: exit %d: %s", code, e)
	}

	// A reader lists and shows, and may change nothing.
	out, errOut, code = cipherd(t, admin, "tokens", "create", "--name", "reader", "--policy", "reader")
	if code != 0 {
		t.Fatalf("tokens create: exit %d: %s", code, errOut)
	}
	reader := []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN=" + strings.TrimSpace(out)}
	if out, errOut, code := cipherd(t, reader, "keys", "list"); code != 0 || !strings.Contains(out, "\norders ") {
		t.Errorf("keys list as a reader: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := cipherd(t, reader, "keys", "rotate", "orders"); code != 1 || !strings.HasPrefix(errOut, "cipherd keys rotate: 403 forbidden: ") {
		t.Errorf("keys rotate as a reader: exit %d: %s", code, errOut)
	}

	// delete schedules the deletion: the key then seals nothing until
	// cancel restores it; an immediate delete is the server's to allow.
	out, errOut, code = cipherd(t, admin, "keys", "delete", "-json", "orders")
	var scheduled api.Key
	if err := json.Unmarshal([]byte(out), &scheduled); code != 0 || err != nil || scheduled.Deletion == nil ||
		scheduled.Deletion.DeleteAt.Sub(scheduled.Deletion.Scheduled) != 30*24*time.Hour {
		t.Fatalf("keys delete -json orders: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	if _, e, code := crypt(t, admin, bytes.NewReader(pt), "encrypt", "--key", "orders"); code != 1 || !strings.Contains(e, "key_pending_deletion") {
		t.Errorf("encrypt --key orders after keys delete: exit %d: %s", code, e)
	}
	if out, errOut, code := cipherd(t, admin, "keys", "show", "orders"); code != 0 || !strings.Contains(out, "\ndeletion:  ") || !strings.Contains(out, "'cipherd keys cancel orders'") {
		t.Errorf("keys show orders while its deletion is scheduled: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := cipherd(t, admin, "keys", "cancel", "orders"); code != 0 || strings.Contains(out, "deletion:") {
		t.Fatalf("keys cancel orders: exit %d\n%s%s", code, out, errOut)
	}
	if _, e, code := crypt(t, admin, bytes.NewReader(pt), "encrypt", "--key", "orders"); code != 0 {
		t.Errorf("encrypt --key orders after keys cancel: exit %d: %s", code, e)
	}
	if _, errOut, code := cipherd(t, admin, "keys", "delete", "--wait", "0", "orders"); code != 1 || !strings.Contains(errOut, "403 immediate_deletion_disallowed") {
		t.Errorf("keys delete --wait 0 orders: exit %d: %s", code, errOut)
	}
	if out, errOut, code := cipherd(t, admin, "keys", "delete", "--wait", "200h", "orders"); code != 0 || !strings.Contains(out, "\ndeletion:  ") {
		t.Fatalf("keys delete --wait 200h orders: exit %d\n%s%s", code, out, errOut)
	}
	if _, e, code := crypt(t, admin, bytes.NewReader(pt), "encrypt", "--key", "orders"); code != 1 {
		t.Errorf("encrypt --key orders after keys delete: exit %d: %s", code, e)
	}

	// The service's refusals: its code and message, exit 1.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "default"}, "cipherd keys create: 409 key_exists: "},
		{[]string{"show", "missing"}, "cipherd keys show: 404 key_not_found: "},
		{[]string{"create", "bad-aead", "--aead", "rot13"}, "cipherd keys create: 400 invalid_config: "},
		{[]string{"config", "default", "--min-decryption-version", "9"}, "cipherd keys config: 400 invalid_config: "},
	} {
		if _, errOut, code := cipherd(t, admin, append([]string{"keys"}, c.args...)...); code != 1 || !strings.HasPrefix(errOut, c.want) {
			t.Errorf("keys %q: exit %d, want 1 and %q: %s", c.args, code, c.want, errOut)
		}
	}

	// Usage errors, before any request: exit 2.
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("not key material\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"show"},
		{"show", "default", "orders"},
		{"list", "default"},
		{"config", "default"},
		{"config", "default", "--json"},
		{"create", "x", "--rotation-period", "a month"},
		{"create", "x", "--min-decryption-version", "-1"},
		{"create", "x", "--allowed-aeads", "aes-256-gcm,"},
		{"create", "x", "--import", garbage},
		{"delete", "default", "--wait", "soon"},
		{"show", "no/such/name"},
	} {
		if out, errOut, code := cipherd(t, admin, append([]string{"keys"}, args...)...); code != 2 || out != "" {
			t.Errorf("keys %q: exit %d, want 2\n%s%s", args, code, out, errOut)
		}
	}
	if k := showKey("default"); k.LatestVersion != 1 || k.MinDecryptionVersion != 0 {
		t.Errorf("the usage errors changed the default key: %+v", k)
	}

	// keys -h lists every subcommand, migrate's own usage included.
	_, errOut, code = cipherd(t, nil, "keys", "-h")
	for _, sub := range []string{"list", "show NAME", "create NAME", "rotate NAME", "config NAME", "delete NAME", "cancel NAME", "disable NAME", "enable NAME", "trim NAME", "migrate -to URL"} {
		if code != 0 || !strings.Contains(errOut, "\n  cipherd keys "+sub) {
			t.Errorf("keys -h: exit %d, lacks %q:\n%s", code, sub, errOut)
		}
	}
	if !strings.Contains(errOut, "-from-keyring FILE    a keyring file") {
		t.Errorf("keys -h lacks migrate's flags:\n%s", errOut)
	}
	if _, errOut, code := cipherd(t, nil, "keys", "config", "-h"); code != 0 || !strings.Contains(errOut, "-min-decryption-version N") {
		t.Errorf("keys config -h: exit %d: %s", code, errOut)
	}
}

// Every field of a key's configuration patch has its flag on keys create
// and keys config, named as its JSON field with dashes, and giving the
// flag alone sets that field alone in the patch keys config sends.
func TestKeysConfigFlagsComplete(t *testing.T) {
	typ := reflect.TypeOf(api.KeyConfigPatch{})
	registered := 0
	fs := flag.NewFlagSet("count", flag.ContinueOnError)
	keyConfigFlags(fs, new(api.KeyConfig))
	fs.VisitAll(func(*flag.Flag) { registered++ })
	if registered != typ.NumField() {
		t.Errorf("keyConfigFlags registers %d flags for the %d fields of api.KeyConfigPatch", registered, typ.NumField())
	}
	for i := range typ.NumField() {
		tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		name := strings.ReplaceAll(tag, "_", "-")
		var cfg api.KeyConfig
		fs := flag.NewFlagSet("config", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		keyConfigFlags(fs, &cfg)
		if fs.Lookup(name) == nil {
			t.Errorf("api.KeyConfigPatch.%s (%q) has no flag --%s (cmd/cipherd/keyscli.go, keyConfigFlags)", typ.Field(i).Name, tag, name)
			continue
		}
		// The empty value resets a string or a list; numbers and booleans
		// take their zero.
		parsed := false
		for _, v := range []string{"", "0", "false"} {
			if fs.Parse([]string{"--" + name + "=" + v}) == nil {
				parsed = true
				break
			}
		}
		if !parsed {
			t.Errorf("--%s takes none of '', 0 and false", name)
			continue
		}
		patch, n := keyConfigPatch(fs, cfg)
		pv := reflect.ValueOf(patch)
		for j := range typ.NumField() {
			if set := pv.Field(j).FieldByName("Set").Bool(); set != (j == i) || n != 1 {
				t.Errorf("--%s alone: the patch sets %s: %v (%d fields in all)", name, typ.Field(j).Name, set, n)
			}
		}
	}
}
