//go:build !cgo

package pkcs11

import (
	"context"
	"fmt"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/pkcs11uri"
)

// Available reports whether this build can load a PKCS#11 module.
const Available = false

// Provider is the PKCS#11 root-key provider; a build without cgo never
// returns one.
type Provider struct{ cryptosvc.RootKeyProvider }

// Open checks the URI and fails with ErrNoCgo.
func Open(_ context.Context, uri string) (*Provider, error) {
	u, err := pkcs11uri.Parse(uri)
	if err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%s: %w", u, ErrNoCgo)
}

// Generate checks the URI and fails with ErrNoCgo.
func Generate(ctx context.Context, uri string) (*Provider, error) { return Open(ctx, uri) }

// Close does nothing.
func (*Provider) Close() error { return nil }
