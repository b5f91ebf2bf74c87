//go:build cgo

package pkcs11

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/pkcs11uri"
	p11 "github.com/miekg/pkcs11"
)

// Available reports whether this build can load a PKCS#11 module.
const Available = true

const (
	gcmIVSize  = 12
	gcmTagBits = 128
	keySize    = 32
)

// Provider is a cryptosvc.RootKeyProvider backed by an AES key in a
// PKCS#11 token. It is safe for concurrent use; operations are serialized
// on one session.
type Provider struct {
	uri  *pkcs11uri.URI
	name string // uri.String()
	mod  *module

	mu   sync.Mutex // guards the fields below and the session's operations
	slot uint
	sess p11.SessionHandle
	key  p11.ObjectHandle
	open bool
}

var _ cryptosvc.RootKeyProvider = (*Provider)(nil)

// Open finds the key the URI names and logs in to its token. It fails
// closed: a module that does not load, no matching token or several, a
// wrong PIN, no such key or several, or a key that is not a sensitive,
// non-extractable AES-256 key that may encrypt and decrypt, each with its
// own message. Errors hold the URI without its PIN source and module.
func Open(ctx context.Context, uri string) (*Provider, error) {
	return open(ctx, uri, false)
}

// Generate creates the key the URI names in its token (cipherd rootkey
// init): an AES-256 token object, private, sensitive and non-extractable,
// allowed to encrypt and decrypt only, with CKA_LABEL the URI's object and
// CKA_ID its id or 16 random bytes. It fails if such a key exists.
func Generate(ctx context.Context, uri string) (*Provider, error) {
	return open(ctx, uri, true)
}

func open(_ context.Context, s string, generate bool) (_ *Provider, err error) {
	u, err := pkcs11uri.Parse(s)
	if err != nil {
		return nil, err
	}
	p := &Provider{uri: u, name: u.String()}
	if u.ModulePath == "" {
		return nil, fmt.Errorf("%s: the URI has no module-path", p.name)
	}
	pin, err := u.PIN()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	p.mod, err = loadModule(u.ModulePath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	defer func() {
		if err != nil {
			p.mod.release()
		}
	}()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.connect(pin, generate); err != nil {
		return nil, err
	}
	if generate {
		if err := p.generate(); err != nil {
			p.disconnect()
			return nil, err
		}
	}
	if err := p.findKey(); err != nil {
		p.disconnect()
		return nil, err
	}
	return p, nil
}

// String returns the URI without its PIN source and module.
func (p *Provider) String() string { return p.name }

// Close logs out and unloads the module when no other provider uses it.
func (p *Provider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mod == nil {
		return nil
	}
	p.disconnect()
	p.mod.release()
	p.mod = nil
	return nil
}

// WrapKey encrypts key with AES-256-GCM in the token, ad as AAD.
func (p *Provider) WrapKey(_ context.Context, key *cryptosvc.Secret, ad []byte) ([]byte, error) {
	iv := make([]byte, gcmIVSize)
	if _, err := io.ReadFull(rand.Reader, iv); err != nil {
		return nil, err
	}
	var out []byte
	err := p.do(func() error {
		params := p11.NewGCMParams(iv, ad, gcmTagBits)
		defer params.Free()
		if err := p.mod.ctx.EncryptInit(p.sess, []*p11.Mechanism{p11.NewMechanism(p11.CKM_AES_GCM, params)}, p.key); err != nil {
			return err
		}
		ct, err := p.mod.ctx.Encrypt(p.sess, key.Expose())
		if err != nil {
			return err
		}
		if used := params.IV(); len(used) == gcmIVSize {
			iv = used
		}
		out = append(append(make([]byte, 0, gcmIVSize+len(ct)), iv...), ct...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: wrapping: %w", p.name, err)
	}
	if len(out) != gcmIVSize+keySize+gcmTagBits/8 {
		return nil, fmt.Errorf("%s: wrapping: the token returned %d bytes, want %d", p.name, len(out), gcmIVSize+keySize+gcmTagBits/8)
	}
	return out, nil
}

// UnwrapKey decrypts what WrapKey returned. A wrapped key that does not
// authenticate under this key and ad fails with cryptosvc.ErrRootKey; a
// token that cannot be reached, with ErrUnreachable.
func (p *Provider) UnwrapKey(_ context.Context, wrapped, ad []byte) (cryptosvc.Secret, error) {
	if len(wrapped) != gcmIVSize+keySize+gcmTagBits/8 {
		return cryptosvc.Secret{}, fmt.Errorf("%w: %s: the wrapped key has the wrong length for this provider", cryptosvc.ErrRootKey, p.name)
	}
	var sec cryptosvc.Secret
	err := p.do(func() error {
		params := p11.NewGCMParams(wrapped[:gcmIVSize], ad, gcmTagBits)
		defer params.Free()
		if err := p.mod.ctx.DecryptInit(p.sess, []*p11.Mechanism{p11.NewMechanism(p11.CKM_AES_GCM, params)}, p.key); err != nil {
			return err
		}
		pt, err := p.mod.ctx.Decrypt(p.sess, wrapped[gcmIVSize:])
		defer clear(pt)
		if err != nil {
			return p.decryptError(err)
		}
		sec, err = cryptosvc.NewSecret(pt)
		return err
	})
	switch {
	case err == nil:
		return sec, nil
	case isAuthFailure(err):
		return cryptosvc.Secret{}, fmt.Errorf("%w: %s does not unwrap the storage key (another root key wrapped it)", cryptosvc.ErrRootKey, p.name)
	default:
		return cryptosvc.Secret{}, fmt.Errorf("%s: unwrapping: %w", p.name, err)
	}
}

func isAuthFailure(err error) bool {
	if errors.Is(err, errTagMismatch) {
		return true
	}
	var e p11.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e {
	case p11.CKR_ENCRYPTED_DATA_INVALID, p11.CKR_ENCRYPTED_DATA_LEN_RANGE, ckrAEADDecryptFailed:
		return true
	}
	return false
}

// errTagMismatch marks a C_Decrypt failure on a live session.
var errTagMismatch = errors.New("pkcs11: the wrapped key does not authenticate")

// decryptError tells a failed tag from a failed token. Tokens report a
// GCM tag mismatch variously: CKR_ENCRYPTED_DATA_INVALID, PKCS #11 3.0's
// CKR_AEAD_DECRYPT_FAILED, or (SoftHSM2 2.6) CKR_GENERAL_ERROR. A general
// failure counts as a mismatch only if the session still answers.
func (p *Provider) decryptError(err error) error {
	var e p11.Error
	if errors.As(err, &e) && (e == p11.CKR_GENERAL_ERROR || e == p11.CKR_FUNCTION_FAILED) {
		if _, serr := p.mod.ctx.GetSessionInfo(p.sess); serr == nil {
			return errTagMismatch
		}
	}
	return err
}

// ckrAEADDecryptFailed is PKCS #11 3.0's CKR_AEAD_DECRYPT_FAILED, which
// miekg/pkcs11 (2.40 headers) does not define.
const ckrAEADDecryptFailed p11.Error = 0x35

// do runs op on the session; if the session or the token went away it
// reconnects once (reading the PIN again) and retries.
func (p *Provider) do(op func() error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mod == nil {
		return cryptosvc.ErrClosed
	}
	if p.open {
		err := op()
		if err == nil || !isSessionLost(err) {
			return err
		}
		p.disconnect()
	}
	pin, err := p.uri.PIN()
	if err != nil {
		return fmt.Errorf("%w: reconnecting: %w", ErrUnreachable, err)
	}
	if err := p.connect(pin, false); err != nil {
		return err
	}
	if err := p.findKey(); err != nil {
		p.disconnect()
		return err
	}
	return op()
}

func isSessionLost(err error) bool {
	var e p11.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e {
	case p11.CKR_SESSION_HANDLE_INVALID, p11.CKR_SESSION_CLOSED, p11.CKR_DEVICE_REMOVED,
		p11.CKR_DEVICE_ERROR, p11.CKR_TOKEN_NOT_PRESENT, p11.CKR_USER_NOT_LOGGED_IN,
		p11.CKR_OBJECT_HANDLE_INVALID, p11.CKR_KEY_HANDLE_INVALID:
		return true
	}
	return false
}

// connect finds the token, opens a session and logs in. Callers hold mu.
//
// Login is per process and token in PKCS#11: while another provider of
// this process is logged in to the token, C_Login answers
// CKR_USER_ALREADY_LOGGED_IN without checking the PIN. The PIN is checked
// by the first provider of a token in a process (at start-up, there is
// only one).
func (p *Provider) connect(pin string, rw bool) error {
	ctx := p.mod.ctx
	slots, err := ctx.GetSlotList(true)
	if err != nil {
		return fmt.Errorf("%w: %s: listing slots: %w", ErrUnreachable, p.name, err)
	}
	var match []uint
	for _, id := range slots {
		if p.uri.HasSlotID && uint64(id) != p.uri.SlotID {
			continue
		}
		ti, err := ctx.GetTokenInfo(id)
		if err != nil {
			continue
		}
		u := p.uri
		if (u.Token == "" || u.Token == ti.Label) && (u.Manufacturer == "" || u.Manufacturer == ti.ManufacturerID) &&
			(u.Model == "" || u.Model == ti.Model) && (u.Serial == "" || u.Serial == ti.SerialNumber) {
			match = append(match, id)
		}
	}
	switch len(match) {
	case 0:
		return fmt.Errorf("%w: %s: no token in module %s matches", ErrUnreachable, p.name, p.uri.ModulePath)
	case 1:
	default:
		return fmt.Errorf("%s: %d tokens match: add serial=… or slot-id=… to the URI", p.name, len(match))
	}
	flags := uint(p11.CKF_SERIAL_SESSION)
	if rw {
		flags |= p11.CKF_RW_SESSION
	}
	sess, err := ctx.OpenSession(match[0], flags)
	if err != nil {
		return fmt.Errorf("%w: %s: opening a session: %w", ErrUnreachable, p.name, err)
	}
	if err := ctx.Login(sess, p11.CKU_USER, pin); err != nil && !errors.Is(err, p11.Error(p11.CKR_USER_ALREADY_LOGGED_IN)) {
		ctx.CloseSession(sess)
		var e p11.Error
		if errors.As(err, &e) && (e == p11.CKR_PIN_INCORRECT || e == p11.CKR_PIN_LOCKED || e == p11.CKR_PIN_EXPIRED || e == p11.CKR_PIN_INVALID || e == p11.CKR_PIN_LEN_RANGE) {
			return fmt.Errorf("%w: %s: login refused (wrong or locked PIN): %w", cryptosvc.ErrRootKey, p.name, err)
		}
		return fmt.Errorf("%s: login: %w", p.name, err)
	}
	p.slot, p.sess, p.open = match[0], sess, true
	return nil
}

// disconnect closes the session; the token's login ends with its last
// session. Callers hold mu.
func (p *Provider) disconnect() {
	if p.open {
		p.mod.ctx.CloseSession(p.sess)
		p.open = false
	}
}

func (p *Provider) keyTemplate() []*p11.Attribute {
	t := []*p11.Attribute{p11.NewAttribute(p11.CKA_CLASS, p11.CKO_SECRET_KEY)}
	if p.uri.Object != "" {
		t = append(t, p11.NewAttribute(p11.CKA_LABEL, p.uri.Object))
	}
	if p.uri.ID != nil {
		t = append(t, p11.NewAttribute(p11.CKA_ID, p.uri.ID))
	}
	return t
}

func (p *Provider) find() ([]p11.ObjectHandle, error) {
	ctx := p.mod.ctx
	if err := ctx.FindObjectsInit(p.sess, p.keyTemplate()); err != nil {
		return nil, fmt.Errorf("%w: %s: finding the key: %w", ErrUnreachable, p.name, err)
	}
	objs, _, err := ctx.FindObjects(p.sess, 2)
	ctx.FindObjectsFinal(p.sess)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: finding the key: %w", ErrUnreachable, p.name, err)
	}
	return objs, nil
}

// findKey sets p.key and checks its attributes. Callers hold mu.
func (p *Provider) findKey() error {
	objs, err := p.find()
	if err != nil {
		return err
	}
	switch len(objs) {
	case 0:
		return fmt.Errorf("%w: %s: the token has no such secret key (create it with cipherd rootkey init)", cryptosvc.ErrRootKey, p.name)
	case 1:
	default:
		return fmt.Errorf("%w: %s: more than one secret key matches: add id=… to the URI", cryptosvc.ErrRootKey, p.name)
	}
	attrs, err := p.mod.ctx.GetAttributeValue(p.sess, objs[0], []*p11.Attribute{
		p11.NewAttribute(p11.CKA_KEY_TYPE, nil),
		p11.NewAttribute(p11.CKA_VALUE_LEN, nil),
		p11.NewAttribute(p11.CKA_SENSITIVE, nil),
		p11.NewAttribute(p11.CKA_EXTRACTABLE, nil),
		p11.NewAttribute(p11.CKA_ENCRYPT, nil),
		p11.NewAttribute(p11.CKA_DECRYPT, nil),
	})
	if err != nil {
		return fmt.Errorf("%w: %s: reading the key's attributes: %w", ErrUnreachable, p.name, err)
	}
	var keyType, valueLen uint64
	flags := map[uint]bool{}
	for _, a := range attrs {
		switch a.Type {
		case p11.CKA_KEY_TYPE:
			keyType = leUint(a.Value)
		case p11.CKA_VALUE_LEN:
			valueLen = leUint(a.Value)
		default:
			flags[a.Type] = len(a.Value) == 1 && a.Value[0] != 0
		}
	}
	switch {
	case keyType != p11.CKK_AES || valueLen != keySize:
		return fmt.Errorf("%w: %s: the key is not an AES-256 key", cryptosvc.ErrRootKey, p.name)
	case !flags[p11.CKA_SENSITIVE] || flags[p11.CKA_EXTRACTABLE]:
		return fmt.Errorf("%w: %s: the key is extractable or not sensitive: a root key must never leave the token", cryptosvc.ErrRootKey, p.name)
	case !flags[p11.CKA_ENCRYPT] || !flags[p11.CKA_DECRYPT]:
		return fmt.Errorf("%w: %s: the key may not encrypt and decrypt", cryptosvc.ErrRootKey, p.name)
	}
	p.key = objs[0]
	return nil
}

// leUint reads a CK_ULONG attribute (native byte order; amd64 and arm64
// are little-endian).
func leUint(b []byte) uint64 {
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// generate creates the key. Callers hold mu, with a read-write session.
func (p *Provider) generate() error {
	objs, err := p.find()
	if err != nil {
		return err
	}
	if len(objs) > 0 {
		return fmt.Errorf("%s: the token already holds such a key; cipherd rootkey init creates a new one only", p.name)
	}
	id := p.uri.ID
	if id == nil {
		id = make([]byte, 16)
		if _, err := io.ReadFull(rand.Reader, id); err != nil {
			return err
		}
	}
	label := p.uri.Object
	if label == "" {
		label = "cipherd-root"
	}
	tmpl := []*p11.Attribute{
		p11.NewAttribute(p11.CKA_CLASS, p11.CKO_SECRET_KEY),
		p11.NewAttribute(p11.CKA_KEY_TYPE, p11.CKK_AES),
		p11.NewAttribute(p11.CKA_VALUE_LEN, keySize),
		p11.NewAttribute(p11.CKA_TOKEN, true),
		p11.NewAttribute(p11.CKA_PRIVATE, true),
		p11.NewAttribute(p11.CKA_SENSITIVE, true),
		p11.NewAttribute(p11.CKA_EXTRACTABLE, false),
		p11.NewAttribute(p11.CKA_ENCRYPT, true),
		p11.NewAttribute(p11.CKA_DECRYPT, true),
		p11.NewAttribute(p11.CKA_WRAP, false),
		p11.NewAttribute(p11.CKA_UNWRAP, false),
		p11.NewAttribute(p11.CKA_SIGN, false),
		p11.NewAttribute(p11.CKA_VERIFY, false),
		p11.NewAttribute(p11.CKA_DERIVE, false),
		p11.NewAttribute(p11.CKA_LABEL, label),
		p11.NewAttribute(p11.CKA_ID, id),
	}
	if _, err := p.mod.ctx.GenerateKey(p.sess, []*p11.Mechanism{p11.NewMechanism(p11.CKM_AES_KEY_GEN, nil)}, tmpl); err != nil {
		return fmt.Errorf("%s: generating the key: %w", p.name, err)
	}
	return nil
}

// A module is loaded and initialized once per process, whatever number of
// providers use it: C_Initialize and C_Finalize are per process.
var modules struct {
	sync.Mutex
	m map[string]*module
}

type module struct {
	path string
	ctx  *p11.Ctx
	refs int
}

func loadModule(path string) (*module, error) {
	modules.Lock()
	defer modules.Unlock()
	if m := modules.m[path]; m != nil {
		m.refs++
		return m, nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%w: module: %w", ErrUnreachable, err)
	}
	ctx := p11.New(path)
	if ctx == nil {
		return nil, fmt.Errorf("%w: module %s does not load as a PKCS#11 module", ErrUnreachable, path)
	}
	if err := ctx.Initialize(); err != nil && !errors.Is(err, p11.Error(p11.CKR_CRYPTOKI_ALREADY_INITIALIZED)) {
		ctx.Destroy()
		return nil, fmt.Errorf("%w: module %s: C_Initialize: %w", ErrUnreachable, path, err)
	}
	if modules.m == nil {
		modules.m = map[string]*module{}
	}
	m := &module{path: path, ctx: ctx, refs: 1}
	modules.m[path] = m
	return m, nil
}

func (m *module) release() {
	modules.Lock()
	defer modules.Unlock()
	if m.refs--; m.refs > 0 {
		return
	}
	delete(modules.m, m.path)
	m.ctx.Finalize()
	m.ctx.Destroy()
}
