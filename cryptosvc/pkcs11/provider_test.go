//go:build cgo

package pkcs11

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/softhsmtest"
	p11 "github.com/miekg/pkcs11"
)

func mustGenerate(t *testing.T, uri string) *Provider {
	t.Helper()
	p, err := Generate(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestProviderWrap(t *testing.T) {
	ctx := context.Background()
	tok := softhsmtest.New(t, "cipherd", "4711-pin")
	uri := tok.URI("cipherd", "root-a")
	p := mustGenerate(t, uri)
	if got := p.String(); got != "pkcs11:token=cipherd;object=root-a" {
		t.Fatalf("String = %q", got)
	}
	sec, err := cryptosvc.GenerateSecret(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	w, err := p.WrapKey(ctx, &sec, []byte("ad"))
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != 60 || bytes.Contains(w, sec.Expose()) {
		t.Fatalf("wrapped: %d bytes, or the key in the clear", len(w))
	}
	// A second provider of the same key (another process, a restart)
	// unwraps it.
	q, err := Open(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	got, err := q.UnwrapKey(ctx, w, []byte("ad"))
	if err != nil || !got.Equal(&sec) {
		t.Fatalf("UnwrapKey: %v", err)
	}
	// Wrong AD, a flipped bit, and another key all fail with ErrRootKey.
	if _, err := q.UnwrapKey(ctx, w, []byte("other")); !errors.Is(err, cryptosvc.ErrRootKey) {
		t.Fatalf("other ad: %v", err)
	}
	flipped := bytes.Clone(w)
	flipped[20] ^= 1
	if _, err := q.UnwrapKey(ctx, flipped, []byte("ad")); !errors.Is(err, cryptosvc.ErrRootKey) {
		t.Fatalf("flipped: %v", err)
	}
	other := mustGenerate(t, tok.URI("cipherd", "root-b"))
	if _, err := other.UnwrapKey(ctx, w, []byte("ad")); !errors.Is(err, cryptosvc.ErrRootKey) {
		t.Fatalf("other key: %v", err)
	}
	// IVs differ between wraps.
	w2, _ := p.WrapKey(ctx, &sec, []byte("ad"))
	if bytes.Equal(w[:12], w2[:12]) {
		t.Fatal("two wraps share an IV")
	}
	// init refuses to make a second key of the same label.
	if _, err := Generate(ctx, uri); err == nil || !strings.Contains(err.Error(), "already holds") {
		t.Fatalf("second init: %v", err)
	}
}

func TestProviderKeyAttributes(t *testing.T) {
	tok := softhsmtest.New(t, "cipherd", "4711-pin")
	p := mustGenerate(t, tok.URI("cipherd", "root"))
	p.mu.Lock()
	defer p.mu.Unlock()
	attrs, err := p.mod.ctx.GetAttributeValue(p.sess, p.key, []*p11.Attribute{
		p11.NewAttribute(p11.CKA_TOKEN, nil),
		p11.NewAttribute(p11.CKA_PRIVATE, nil),
		p11.NewAttribute(p11.CKA_SENSITIVE, nil),
		p11.NewAttribute(p11.CKA_EXTRACTABLE, nil),
		p11.NewAttribute(p11.CKA_WRAP, nil),
		p11.NewAttribute(p11.CKA_DERIVE, nil),
		p11.NewAttribute(p11.CKA_ALWAYS_SENSITIVE, nil),
		p11.NewAttribute(p11.CKA_NEVER_EXTRACTABLE, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint]bool{p11.CKA_TOKEN: true, p11.CKA_PRIVATE: true, p11.CKA_SENSITIVE: true, p11.CKA_EXTRACTABLE: false,
		p11.CKA_WRAP: false, p11.CKA_DERIVE: false, p11.CKA_ALWAYS_SENSITIVE: true, p11.CKA_NEVER_EXTRACTABLE: true}
	for _, a := range attrs {
		if got := len(a.Value) == 1 && a.Value[0] != 0; got != want[a.Type] {
			t.Errorf("attribute 0x%x = %v, want %v", a.Type, got, want[a.Type])
		}
	}
	// The token refuses to reveal the value.
	if _, err := p.mod.ctx.GetAttributeValue(p.sess, p.key, []*p11.Attribute{p11.NewAttribute(p11.CKA_VALUE, nil)}); err == nil {
		t.Fatal("the token revealed CKA_VALUE")
	}
}

// TestProviderFailsClosed: every misconfiguration fails at Open with its
// own message, and no message holds the PIN.
func TestProviderFailsClosed(t *testing.T) {
	ctx := context.Background()
	pin := "4711-pin-secret"
	tok := softhsmtest.New(t, "cipherd", pin)
	// An extractable AES key made by hand is refused.
	hand := mustGenerate(t, tok.URI("cipherd", "root"))
	hand.mu.Lock()
	_, err := hand.mod.ctx.GenerateKey(hand.sess, []*p11.Mechanism{p11.NewMechanism(p11.CKM_AES_KEY_GEN, nil)}, []*p11.Attribute{
		p11.NewAttribute(p11.CKA_CLASS, p11.CKO_SECRET_KEY), p11.NewAttribute(p11.CKA_KEY_TYPE, p11.CKK_AES),
		p11.NewAttribute(p11.CKA_VALUE_LEN, 32), p11.NewAttribute(p11.CKA_TOKEN, true), p11.NewAttribute(p11.CKA_PRIVATE, true),
		p11.NewAttribute(p11.CKA_SENSITIVE, false), p11.NewAttribute(p11.CKA_EXTRACTABLE, true),
		p11.NewAttribute(p11.CKA_ENCRYPT, true), p11.NewAttribute(p11.CKA_DECRYPT, true),
		p11.NewAttribute(p11.CKA_LABEL, "loose"),
	})
	hand.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	// No provider of this process stays logged in, so that the wrong PIN
	// is checked (see connect).
	hand.Close()
	wrongPIN := filepath.Join(t.TempDir(), "pin")
	os.WriteFile(wrongPIN, []byte("0000\n"), 0o600)
	good := tok.URI("cipherd", "root")
	for _, tc := range []struct {
		name, uri string
		want      error
		says      string
	}{
		{"wrong PIN", strings.Replace(good, tok.PINFile, wrongPIN, 1), cryptosvc.ErrRootKey, "wrong or locked PIN"},
		{"missing object", tok.URI("cipherd", "nothing"), cryptosvc.ErrRootKey, "no such secret key"},
		{"extractable key", tok.URI("cipherd", "loose"), cryptosvc.ErrRootKey, "extractable"},
		{"wrong token", tok.URI("nosuch", "root"), ErrUnreachable, "no token"},
		{"missing module", strings.Replace(good, tok.Module, "/nonexistent/libp11.so", 1), ErrUnreachable, "module"},
		{"not a module", strings.Replace(good, tok.Module, "/etc/passwd", 1), ErrUnreachable, "does not load"},
		{"missing PIN file", strings.Replace(good, tok.PINFile, "/nonexistent/pin", 1), nil, "PIN file"},
		{"no module-path", "pkcs11:token=cipherd;object=root", nil, "no module-path"},
		{"pin-value", good + "&pin-value=" + pin, nil, "pin-value is refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Open(ctx, tc.uri)
			if err == nil {
				p.Close()
				t.Fatal("Open succeeded")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			if strings.Contains(err.Error(), pin) || strings.Contains(err.Error(), tok.PINFile) && tc.name != "missing PIN file" {
				t.Errorf("error %q holds the PIN or its source", err)
			}
		})
	}
}
