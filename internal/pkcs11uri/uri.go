// Package pkcs11uri parses the PKCS#11 URIs of RFC 7512 that name cipherd's
// root key: a token, a secret-key object in it, the module that reaches it,
// and where its PIN comes from.
//
//	pkcs11:token=cipherd;object=cipherd-root?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/run/secrets/pin
//
// It is written here rather than taken from a library: the one Go parser of
// RFC 7512 (github.com/stefanberger/go-pkcs11uri, untagged since 2023)
// rejects type=secret-key, which cipherd's URIs use, and quotes attribute
// values in its errors, which would put a pin-value in logs.
//
// References:
//   - RFC 7512, The PKCS #11 URI Scheme
package pkcs11uri

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// EnvPIN names the environment variable that holds the token's user PIN
// when the URI has no pin-source.
const EnvPIN = "CIPHERD_PKCS11_PIN"

// ErrSyntax is wrapped by every parse error. Errors name attributes, never
// their values.
var ErrSyntax = errors.New("pkcs11uri: invalid PKCS#11 URI")

// URI is a parsed PKCS#11 URI. Only the attributes cipherd uses are kept;
// others are refused by Parse, so that a URI never names fewer constraints
// than its writer meant.
type URI struct {
	// Token attributes (CK_TOKEN_INFO); empty means any.
	Token, Manufacturer, Model, Serial string
	// SlotID is the slot's number when HasSlotID.
	SlotID    uint64
	HasSlotID bool
	// Object is the key's CKA_LABEL; ID its CKA_ID (nil means any).
	Object string
	ID     []byte
	// Type is "secret-key" or empty.
	Type string
	// ModulePath is the PKCS#11 module (an absolute path).
	ModulePath string
	// PINSource is the pin-source attribute: an absolute path, or a file:
	// URI; empty means EnvPIN.
	PINSource string
}

var (
	pathAttrs  = []string{"token", "manufacturer", "model", "serial", "slot-id", "object", "id", "type"}
	queryAttrs = []string{"module-path", "pin-source", "pin-value", "module-name"}
)

// Parse parses s. It refuses pin-value (a PIN belongs in a file or the
// environment, not in configuration that is logged and listed), module-name
// (give module-path), and attributes it does not know.
func Parse(s string) (*URI, error) {
	rest, ok := strings.CutPrefix(s, "pkcs11:")
	if !ok {
		return nil, fmt.Errorf("%w: the scheme is not pkcs11", ErrSyntax)
	}
	path, query, _ := strings.Cut(rest, "?")
	u := &URI{}
	seen := map[string]bool{}
	var pp, qq []string
	if path != "" {
		pp = strings.Split(path, ";")
	}
	if query != "" {
		qq = strings.Split(query, "&")
	}
	for i, list := range [][]string{pp, qq} {
		for _, kv := range list {
			name, raw, ok := strings.Cut(kv, "=")
			if !ok || name == "" {
				return nil, fmt.Errorf("%w: an attribute without a name or '='", ErrSyntax)
			}
			if seen[name] {
				return nil, fmt.Errorf("%w: attribute %s given twice", ErrSyntax, name)
			}
			seen[name] = true
			v, err := url.PathUnescape(raw)
			if err != nil {
				// err quotes the bad escape: not wrapped.
				return nil, fmt.Errorf("%w: attribute %s is not validly percent-encoded", ErrSyntax, name)
			}
			isPath := slices.Contains(pathAttrs, name)
			if !isPath && !slices.Contains(queryAttrs, name) {
				return nil, fmt.Errorf("%w: unknown attribute %s", ErrSyntax, name)
			}
			if isPath != (i == 0) {
				return nil, fmt.Errorf("%w: attribute %s is not allowed in the %s", ErrSyntax, name, [...]string{"path", "query"}[i])
			}
			if err := u.set(name, v); err != nil {
				return nil, err
			}
		}
	}
	if u.Object == "" && u.ID == nil {
		return nil, fmt.Errorf("%w: it names no key (give object=<label> or id=<bytes>)", ErrSyntax)
	}
	return u, nil
}

func (u *URI) set(name, v string) error {
	switch name {
	case "token":
		u.Token = v
	case "manufacturer":
		u.Manufacturer = v
	case "model":
		u.Model = v
	case "serial":
		u.Serial = v
	case "slot-id":
		var n uint64
		if _, err := fmt.Sscanf(v, "%d", &n); err != nil || fmt.Sprint(n) != v {
			return fmt.Errorf("%w: slot-id is not a decimal number", ErrSyntax)
		}
		u.SlotID, u.HasSlotID = n, true
	case "object":
		u.Object = v
	case "id":
		u.ID = []byte(v)
	case "type":
		if v != "secret-key" {
			return fmt.Errorf("%w: type must be secret-key (the root key is an AES key)", ErrSyntax)
		}
		u.Type = v
	case "module-path":
		if !filepath.IsAbs(v) {
			return fmt.Errorf("%w: module-path must be an absolute path", ErrSyntax)
		}
		u.ModulePath = v
	case "pin-source":
		u.PINSource = v
	case "pin-value":
		return fmt.Errorf("%w: pin-value is refused: give pin-source=file:<path> or set %s", ErrSyntax, EnvPIN)
	case "module-name":
		return fmt.Errorf("%w: module-name is not supported: give module-path=<absolute path of the module>", ErrSyntax)
	default:
		return fmt.Errorf("%w: unknown attribute %s", ErrSyntax, name)
	}
	return nil
}

// String returns the URI's path attributes, which name the token and key
// but hold neither the PIN source nor the module: the form for logs and
// errors.
func (u *URI) String() string {
	var b strings.Builder
	b.WriteString("pkcs11:")
	add := func(name, v string) {
		if b.Len() > len("pkcs11:") {
			b.WriteByte(';')
		}
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(escape(v))
	}
	for _, a := range [][2]string{{"token", u.Token}, {"manufacturer", u.Manufacturer}, {"model", u.Model}, {"serial", u.Serial}} {
		if a[1] != "" {
			add(a[0], a[1])
		}
	}
	if u.HasSlotID {
		add("slot-id", fmt.Sprint(u.SlotID))
	}
	if u.Object != "" {
		add("object", u.Object)
	}
	if u.ID != nil {
		add("id", string(u.ID))
	}
	if u.Type != "" {
		add("type", u.Type)
	}
	return b.String()
}

// escape percent-encodes all but RFC 7512's unreserved characters and the
// few path characters it allows unencoded.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~:[]@!$'()*+,", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// maxPIN bounds a PIN file.
const maxPIN = 1024

// PIN returns the user PIN: the content of the pin-source file without a
// final newline, or the value of EnvPIN. Errors name the file or the
// variable, never the PIN.
func (u *URI) PIN() (string, error) {
	if u.PINSource == "" {
		v, ok := os.LookupEnv(EnvPIN)
		if !ok || v == "" {
			return "", fmt.Errorf("pkcs11: no PIN: give pin-source=file:<path> in the URI or set %s", EnvPIN)
		}
		return v, nil
	}
	path := u.PINSource
	if rest, ok := strings.CutPrefix(path, "file:"); ok {
		path = strings.TrimPrefix(rest, "//")
	}
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("pkcs11: pin-source must be file:<absolute path>")
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("pkcs11: PIN file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPIN+1))
	if err != nil {
		return "", fmt.Errorf("pkcs11: reading the PIN file %s: %w", path, err)
	}
	if len(b) > maxPIN {
		return "", fmt.Errorf("pkcs11: the PIN file %s is larger than %d bytes", path, maxPIN)
	}
	pin := strings.TrimRight(string(b), "\r\n")
	clear(b)
	if pin == "" {
		return "", fmt.Errorf("pkcs11: the PIN file %s is empty", path)
	}
	return pin, nil
}
