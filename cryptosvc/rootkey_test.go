package cryptosvc

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRootKeyParse(t *testing.T) {
	want := ksTestSecret(t)
	b := want.Expose()
	for name, text := range map[string]string{
		"hex":            hex.EncodeToString(b),
		"HEX":            strings.ToUpper(hex.EncodeToString(b)),
		"base64":         base64.StdEncoding.EncodeToString(b),
		"base64 raw url": base64.RawURLEncoding.EncodeToString(b),
		"whitespace":     " \t" + base64.StdEncoding.EncodeToString(b) + "\r\n",
	} {
		got, err := ParseRootKey(text)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !got.Equal(&want) {
			t.Fatalf("%s: wrong key", name)
		}
	}

	std := base64.StdEncoding.EncodeToString(b)
	for !strings.ContainsAny(std[:43], "+/") { // so that it is not also raw URL base64
		want = ksTestSecret(t)
		b = want.Expose()
		std = base64.StdEncoding.EncodeToString(b)
	}
	bad := map[string]string{
		"empty":        "",
		"spaces":       "   \n",
		"short hex":    hex.EncodeToString(b[:31]),
		"long hex":     hex.EncodeToString(append(b, 0)),
		"bad hex":      "zz" + hex.EncodeToString(b)[2:],
		"unpadded std": strings.TrimRight(std, "="),
		"padded url":   base64.URLEncoding.EncodeToString(b) + "x",
		"bad base64":   "*" + std[1:],
		"inner space":  std[:20] + " " + std[21:],
		"zero key":     hex.EncodeToString(make([]byte, 32)),
		"raw bytes":    string(b),
	}
	// Non-canonical base64: the last character's two unused bits set.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	bad["non-canonical"] = std[:42] + string(alphabet[strings.IndexByte(alphabet, std[42])|3]) + "="
	for name, text := range bad {
		_, err := ParseRootKey(text)
		if !errors.Is(err, ErrRootKey) {
			t.Errorf("%s: err = %v, want ErrRootKey", name, err)
			continue
		}
		if len(text) > 8 && strings.Contains(err.Error(), strings.TrimSpace(text)[:8]) {
			t.Errorf("%s: the error quotes the value: %v", name, err)
		}
	}
}

func TestRootKeyLoad(t *testing.T) {
	fileKey, envKey := ksTestSecret(t), ksTestSecret(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "root.key")
	if err := os.WriteFile(file, []byte(hex.EncodeToString(fileKey.Expose())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const env = "CIPHERD_TEST_ROOT_KEY"
	envText := base64.RawURLEncoding.EncodeToString(envKey.Expose())
	t.Setenv(env, envText)

	got, err := LoadRootKey(file, env) // the file wins
	if err != nil || !got.Equal(&fileKey) {
		t.Fatalf("file and env: %v (equal %v)", err, got.Equal(&fileKey))
	}
	got, err = LoadRootKey("", env)
	if err != nil || !got.Equal(&envKey) {
		t.Fatalf("env: %v (equal %v)", err, got.Equal(&envKey))
	}

	for name, call := range map[string]func() (Secret, error){
		"neither":      func() (Secret, error) { return LoadRootKey("", "") },
		"unset env":    func() (Secret, error) { return LoadRootKey("", "CIPHERD_TEST_UNSET_ROOT_KEY") },
		"missing file": func() (Secret, error) { return LoadRootKey(filepath.Join(dir, "absent"), env) },
		"bad file": func() (Secret, error) {
			p := filepath.Join(dir, "bad")
			os.WriteFile(p, []byte(envText[:30]), 0o600)
			return LoadRootKey(p, env)
		},
		"bad env": func() (Secret, error) {
			t.Setenv("CIPHERD_TEST_BAD_ROOT_KEY", envText[:30])
			return LoadRootKey("", "CIPHERD_TEST_BAD_ROOT_KEY")
		},
	} {
		_, err := call()
		if !errors.Is(err, ErrRootKey) {
			t.Errorf("%s: err = %v, want ErrRootKey", name, err)
			continue
		}
		ksAssertNoMaterial(t, name+" error", []byte(err.Error()), &fileKey, &envKey)
		if strings.Contains(err.Error(), envText[:20]) {
			t.Errorf("%s: the error quotes the value: %v", name, err)
		}
	}
	if EnvRootKey != "CIPHERD_ROOT_KEY" || EnvRootKeyFile != "CIPHERD_ROOT_KEY_FILE" {
		t.Error("the documented environment variable names changed")
	}
}
