//go:build !cgo

package pkcs11

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/internal/pkcs11uri"
)

// TestNoCgo: a build without cgo refuses a PKCS#11 URI with ErrNoCgo,
// after checking it, and says what to do instead.
func TestNoCgo(t *testing.T) {
	if Available {
		t.Fatal("Available in a build without cgo")
	}
	uri := "pkcs11:token=cipherd;object=root?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/run/pin"
	for _, f := range []func(context.Context, string) (*Provider, error){Open, Generate} {
		_, err := f(context.Background(), uri)
		if !errors.Is(err, ErrNoCgo) || !strings.Contains(err.Error(), "CGO_ENABLED=1") || strings.Contains(err.Error(), "/run/pin") {
			t.Fatalf("error %v, want ErrNoCgo naming the remedy and not the PIN source", err)
		}
	}
	if _, err := Open(context.Background(), "pkcs11:token=cipherd"); !errors.Is(err, pkcs11uri.ErrSyntax) {
		t.Fatalf("a bad URI: %v, want ErrSyntax", err)
	}
}
