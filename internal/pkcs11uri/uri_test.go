package pkcs11uri

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	u, err := Parse("pkcs11:token=my%20token;object=cipherd-root;id=%01%02;type=secret-key;slot-id=3?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/run/pin")
	if err != nil {
		t.Fatal(err)
	}
	if u.Token != "my token" || u.Object != "cipherd-root" || string(u.ID) != "\x01\x02" || u.Type != "secret-key" ||
		!u.HasSlotID || u.SlotID != 3 || u.ModulePath != "/usr/lib/softhsm/libsofthsm2.so" || u.PINSource != "file:/run/pin" {
		t.Fatalf("%+v", u)
	}
	// String keeps the path attributes, re-encoded, and drops the query.
	if got, want := u.String(), "pkcs11:token=my%20token;slot-id=3;object=cipherd-root;id=%01%02;type=secret-key"; got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
	again, err := Parse(u.String())
	if err != nil || again.String() != u.String() {
		t.Fatalf("String does not parse back: %v", err)
	}
}

func TestParseRejects(t *testing.T) {
	const secret = "s3cr3t-PIN"
	for _, tc := range []struct{ uri, says string }{
		{"pkcs12:token=a;object=b", "scheme is not pkcs11"},
		{"pkcs11:token=a", "names no key"},
		{"pkcs11:token=a;token=b;object=c", "twice"},
		{"pkcs11:object=a;colour=red", "unknown attribute colour"},
		{"pkcs11:object=a?module-path=lib.so", "absolute"},
		{"pkcs11:object=a?pin-value=" + secret, "pin-value is refused"},
		{"pkcs11:object=a?pin-value=%zz" + secret, "not validly percent-encoded"},
		{"pkcs11:object=a?module-name=softhsm2", "module-path"},
		{"pkcs11:object=a;type=private", "secret-key"},
		{"pkcs11:object=a;slot-id=01", "decimal"},
		{"pkcs11:object=a;module-path=/x.so", "not allowed in the path"},
		{"pkcs11:token?object=a", "without a name"},
	} {
		_, err := Parse(tc.uri)
		if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Parse(%q) = %v, want ErrSyntax saying %q", tc.uri, err, tc.says)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("Parse(%q): the error holds the PIN", tc.uri)
		}
	}
}

func TestPIN(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pin")
	os.WriteFile(file, []byte("1234\n"), 0o600)
	for _, src := range []string{"file:" + file, file, "file://" + file} {
		u, _ := Parse("pkcs11:object=a?pin-source=" + src)
		if pin, err := u.PIN(); err != nil || pin != "1234" {
			t.Errorf("pin-source=%s: %q, %v", src, pin, err)
		}
	}
	u, _ := Parse("pkcs11:object=a")
	t.Setenv(EnvPIN, "")
	if _, err := u.PIN(); err == nil || !strings.Contains(err.Error(), EnvPIN) {
		t.Errorf("no PIN: %v", err)
	}
	t.Setenv(EnvPIN, "5678")
	if pin, err := u.PIN(); err != nil || pin != "5678" {
		t.Errorf("env PIN: %q, %v", pin, err)
	}
	os.WriteFile(file, []byte("\n"), 0o600)
	u, _ = Parse("pkcs11:object=a?pin-source=" + file)
	if _, err := u.PIN(); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty PIN file: %v", err)
	}
	u, _ = Parse("pkcs11:object=a?pin-source=relative/pin")
	if _, err := u.PIN(); err == nil {
		t.Error("a relative pin-source was accepted")
	}
}
