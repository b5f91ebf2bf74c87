package rootkey

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/cryptosvc/pkcs11"
)

// EnvURI names the environment variable that holds Config.URI for cipherd.
const EnvURI = "CIPHERD_ROOT_KEY_URI"

// Config names a root key (see the package documentation). Its zero value
// names none, unless CIPHERD_ROOT_KEY is set.
type Config struct {
	// URI, when set, names the provider: "pkcs11:…" or "file:<path>". It
	// wins over File and the environment. cipherd's root_key_uri.
	URI string
	// File, when set and URI is not, is a file holding a static root key.
	// cipherd's root_key_file. With neither, CIPHERD_ROOT_KEY is read.
	File string
}

// Open opens the provider cfg names. It returns nil, nil when cfg names
// none and CIPHERD_ROOT_KEY is unset or empty. The caller closes the
// provider with Close once nothing uses it.
func Open(ctx context.Context, cfg Config) (cryptosvc.RootKeyProvider, error) {
	if cfg.URI != "" {
		return OpenURI(ctx, cfg.URI)
	}
	if cfg.File == "" && os.Getenv(cryptosvc.EnvRootKey) == "" {
		return nil, nil
	}
	root, err := cryptosvc.LoadRootKey(cfg.File, cryptosvc.EnvRootKey)
	if err != nil {
		return nil, err
	}
	return cryptosvc.NewStaticRootKey(&root, nil)
}

// OpenURI opens the provider uri names: "pkcs11:…" or "file:<path>"
// ("file://<path>" too).
func OpenURI(ctx context.Context, uri string) (cryptosvc.RootKeyProvider, error) {
	switch {
	case strings.HasPrefix(uri, "pkcs11:"):
		p, err := pkcs11.Open(ctx, uri)
		if err != nil {
			return nil, err
		}
		return p, nil
	case strings.HasPrefix(uri, "file:"):
		path := strings.TrimPrefix(strings.TrimPrefix(uri, "file:"), "//")
		root, err := cryptosvc.LoadRootKey(path, "")
		if err != nil {
			return nil, err
		}
		return cryptosvc.NewStaticRootKey(&root, nil)
	}
	return nil, fmt.Errorf("%w: root key URI: give pkcs11:… or file:<path>", cryptosvc.ErrRootKey)
}

// Close releases what p holds (a PKCS#11 session), if anything; p may be
// nil.
func Close(p cryptosvc.RootKeyProvider) {
	if c, ok := p.(io.Closer); ok && p != nil {
		c.Close()
	}
}
