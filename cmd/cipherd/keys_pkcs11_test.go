//go:build cgo && (darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/internal/pgtest"
	"github.com/cipherd/cipherd/internal/softhsmtest"
)

// TestKeysMigratePKCS11: cipherd keys migrate moves the README's
// development store into a PostgreSQL keystore whose root key is in a
// PKCS#11 token (root_key_uri), and a server on that database with that
// root key serves the key.
func TestKeysMigratePKCS11(t *testing.T) {
	db := pgtest.Start(t)
	pin := "migrate-pin-" + fmt.Sprint(time.Now().UnixNano())
	tok := softhsmtest.New(t, "cipherd", pin)
	uri := tok.URI("cipherd", "cipherd-root")
	if out, e, code := cipherd(t, nil, "rootkey", "init", "-uri", uri); code != 0 {
		t.Fatalf("rootkey init: %d\n%s%s", code, out, e)
	}
	clean := []string{"CIPHERD_ROOT_KEY=", "CIPHERD_ROOT_KEY_FILE="}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"CIPHERD_ROOT_KEY_URI", []string{"CIPHERD_ROOT_KEY_URI=" + uri}, nil},
		{"flag", []string{"CIPHERD_ROOT_KEY_URI="}, []string{"-root-key-uri", uri}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := db.Database(t)
			dir, k := devStore(t)
			env := append(clean[:len(clean):len(clean)], tc.env...)
			out, errOut, code := cipherd(t, env, append([]string{"keys", "migrate", "-to", dsn, "-from-dir", dir}, tc.args...)...)
			assertMigrated(t, dsn, nil, out, errOut, code, k)
			if strings.Contains(out+errOut, pin) {
				t.Fatal("the output shows the PIN")
			}

			// A replica on the database and the token serves the key.
			s, err := rkStart(t, t.TempDir(), "CIPHERD_KEYSTORE="+dsn, "CIPHERD_ROOT_KEY_URI="+uri, "CIPHERD_DEFAULT_KEY=-")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rkClient(t, s.url).Encrypt(t.Context(), k.Name, []byte("hello"), nil); err != nil {
				t.Fatalf("the migrated key on the replica: %v", err)
			}
		})
	}
}
