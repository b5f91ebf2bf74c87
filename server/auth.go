package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/zap"

	"github.com/cipherd/cipherd/api"
)

// Callers are identified, in this order, by
//
//  1. a bearer token (Authorization: Bearer …), known by its SHA-256;
//  2. a client certificate that a trusted proxy forwarded in
//     X-Forwarded-Client-Cert (see forwardedCert);
//  3. the verified client certificate of the TLS connection.
//
// Certificates are known by the SHA-256 of their SubjectPublicKeyInfo, so a
// re-issued certificate for the same key keeps its identity. A credential that
// is presented but unknown ends the search with 401: a wrong token does not
// fall back to the connection's certificate, and a forwarded certificate does
// not fall back to the proxy's own.

// Op is an operation that policies allow or deny.
type Op string

// Operations.
const (
	OpEncrypt          Op = "encrypt"
	OpDecrypt          Op = "decrypt"
	OpRewrap           Op = "rewrap"
	OpDataKey          Op = "datakey"           // wrapped data keys
	OpDataKeyPlaintext Op = "datakey-plaintext" // data keys with the plaintext copy
	OpKeysRead         Op = "keys-read"
	OpKeysAdmin        Op = "keys-admin"
	OpSpeedRun         Op = "speed-run"
)

var allOps = []Op{OpEncrypt, OpDecrypt, OpRewrap, OpDataKey, OpDataKeyPlaintext, OpKeysRead, OpKeysAdmin, OpSpeedRun}

// identity is an authenticated caller.
type identity struct {
	name     string
	admin    bool
	policies []*policy
}

type rule struct {
	ops  map[Op]bool
	keys []string // path.Match patterns, checked at start-up
}

type policy struct {
	name        string
	allow, deny []rule
}

func (r rule) matches(op Op, key string) bool {
	if !r.ops[op] {
		return false
	}
	for _, p := range r.keys {
		if ok, _ := path.Match(p, key); ok {
			return true
		}
	}
	return false
}

// allowed reports whether id may do op on key: some rule allows it and no
// rule of any of its policies denies it. The admin may do everything.
func (id *identity) allowed(op Op, key string) bool {
	if id.admin {
		return true
	}
	allow := false
	for _, p := range id.policies {
		for _, r := range p.deny {
			if r.matches(op, key) {
				return false
			}
		}
		for _, r := range p.allow {
			allow = allow || r.matches(op, key)
		}
	}
	return allow
}

// authState holds the credentials. Nothing in it is a secret: tokens are
// kept as SHA-256 hashes only.
type authState struct {
	tokens    []tokenHash                     // admin first; always scanned whole
	certs     map[[sha256.Size]byte]*identity // SPKI hashes (public)
	proxies   []netip.Prefix                  // may forward client certificates
	limits    *rateLimiter                    // nil: no rate limit
	generated string                          // admin token generated on this start, shown once
}

type tokenHash struct {
	sum [sha256.Size]byte
	id  *identity
}

const (
	adminTokenFile = "admin-token.sha256"
	adminName      = "admin"
)

var adminIdentity = &identity{name: adminName, admin: true}

// newAuth builds the credentials and policies of cfg. It drops
// cfg.AdminToken once hashed, so that the server keeps no token in clear.
func newAuth(cfg *Config, log *zap.Logger) (*authState, error) {
	admin, generated, err := adminTokenHash(cfg, log)
	if err != nil {
		return nil, err
	}
	cfg.AdminToken = ""
	a := &authState{
		tokens:    []tokenHash{{admin, adminIdentity}},
		certs:     map[[sha256.Size]byte]*identity{},
		generated: generated,
	}
	policies, err := newPolicies(cfg.Policies)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{adminName: true}
	for _, ic := range cfg.Identities {
		if ic.Name == "" || names[ic.Name] {
			return nil, fmt.Errorf("server: identity name %q is empty, reserved or used twice", ic.Name)
		}
		names[ic.Name] = true
		id := &identity{name: ic.Name}
		for _, pn := range ic.Policies {
			p := policies[pn]
			if p == nil {
				return nil, fmt.Errorf("server: identity %s: no policy %q", ic.Name, pn)
			}
			id.policies = append(id.policies, p)
		}
		if ic.TokenSHA256 == "" && ic.CertSHA256 == "" {
			return nil, fmt.Errorf("server: identity %s has neither token_sha256 nor cert_sha256", ic.Name)
		}
		if ic.TokenSHA256 != "" {
			sum, err := parseSHA256(ic.TokenSHA256)
			if err != nil {
				return nil, fmt.Errorf("server: identity %s: token_sha256: %w", ic.Name, err)
			}
			if a.identifyHash(sum) != nil {
				return nil, fmt.Errorf("server: identity %s: its token is also another identity's", ic.Name)
			}
			a.tokens = append(a.tokens, tokenHash{sum, id})
		}
		if ic.CertSHA256 != "" {
			sum, err := parseSHA256(ic.CertSHA256)
			if err != nil {
				return nil, fmt.Errorf("server: identity %s: cert_sha256: %w", ic.Name, err)
			}
			if a.certs[sum] != nil {
				return nil, fmt.Errorf("server: identity %s: its certificate key is also another identity's", ic.Name)
			}
			a.certs[sum] = id
		}
	}
	for _, p := range cfg.TrustedProxies {
		pfx, err := netip.ParsePrefix(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("server: trusted proxy %q is not a CIDR", p)
		}
		a.proxies = append(a.proxies, pfx.Masked())
	}
	a.limits = newRateLimiter(cfg.RateLimit, cfg.RateBurst, names)
	return a, nil
}

// adminTokenHash returns the SHA-256 of the admin token: of the configured
// one, or of the one stored hashed in DataDir, or of a new one that it
// stores (hashed) and returns once as generated.
func adminTokenHash(cfg *Config, log *zap.Logger) (sum [sha256.Size]byte, generated string, err error) {
	if cfg.AdminToken != "" {
		if len(cfg.AdminToken) < 16 {
			log.Warn("the configured admin token is short; use at least 32 random bytes")
		}
		return sha256.Sum256([]byte(cfg.AdminToken)), "", nil
	}
	file := filepath.Join(cfg.DataDir, adminTokenFile)
	b, err := os.ReadFile(file)
	switch {
	case err == nil:
		sum, err := parseSHA256(strings.TrimSpace(string(b)))
		if err != nil {
			return sum, "", fmt.Errorf("server: %s is damaged", file)
		}
		return sum, "", nil
	case !errors.Is(err, os.ErrNotExist):
		return sum, "", fmt.Errorf("server: reading %s: %w", file, err)
	}
	var raw [32]byte
	rand.Read(raw[:])
	tok := "cdadm_" + base64.RawURLEncoding.EncodeToString(raw[:])
	sum = sha256.Sum256([]byte(tok))
	if err := writeFileAtomic(file, []byte(hex.EncodeToString(sum[:])+"\n")); err != nil {
		return sum, "", fmt.Errorf("server: storing the admin token hash: %w", err)
	}
	log.Warn("generated an admin token; it is shown once on standard error and stored only hashed", zap.String("file", file))
	return sum, tok, nil
}

func newPolicies(pcs []PolicyConfig) (map[string]*policy, error) {
	policies := map[string]*policy{}
	for _, pc := range pcs {
		if pc.Name == "" || policies[pc.Name] != nil {
			return nil, fmt.Errorf("server: policy name %q is empty or used twice", pc.Name)
		}
		p := &policy{name: pc.Name}
		for i, list := range [][]RuleConfig{pc.Allow, pc.Deny} {
			for _, rc := range list {
				r, err := newRule(rc)
				if err != nil {
					return nil, fmt.Errorf("server: policy %s: %w", pc.Name, err)
				}
				if i == 0 {
					p.allow = append(p.allow, r)
				} else {
					p.deny = append(p.deny, r)
				}
			}
		}
		policies[pc.Name] = p
	}
	return policies, nil
}

func newRule(rc RuleConfig) (rule, error) {
	if len(rc.Ops) == 0 || len(rc.Keys) == 0 {
		return rule{}, errors.New(`a rule needs ops and keys (use "*" for all)`)
	}
	r := rule{ops: map[Op]bool{}, keys: rc.Keys}
	for _, o := range rc.Ops {
		switch {
		case o == "*":
			for _, op := range allOps {
				r.ops[op] = true
			}
		case validOp(Op(o)):
			r.ops[Op(o)] = true
		default:
			return rule{}, fmt.Errorf("unknown operation %q", o)
		}
	}
	for _, k := range rc.Keys {
		if _, err := path.Match(k, ""); err != nil {
			return rule{}, fmt.Errorf("bad key pattern %q", k)
		}
	}
	return r, nil
}

func validOp(op Op) bool {
	for _, o := range allOps {
		if o == op {
			return true
		}
	}
	return false
}

func parseSHA256(s string) (sum [sha256.Size]byte, err error) {
	if len(s) != 2*sha256.Size {
		return sum, errors.New("want 64 hex characters")
	}
	if _, err := hex.Decode(sum[:], []byte(s)); err != nil {
		return sum, errors.New("want 64 hex characters")
	}
	return sum, nil
}

// identify returns the caller presenting bearer token tok, or nil.
func (a *authState) identify(tok string) *identity {
	if tok == "" {
		return nil
	}
	return a.identifyHash(sha256.Sum256([]byte(tok)))
}

// identifyHash returns the identity whose token hashes to sum, or nil. Every
// stored hash is compared, in constant time, so that timing tells nothing
// about the stored hashes (which would help an offline guess at a weak
// configured token).
func (a *authState) identifyHash(sum [sha256.Size]byte) *identity {
	var found *identity
	for i := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], a.tokens[i].sum[:]) == 1 {
			found = a.tokens[i].id
		}
	}
	return found
}

// trustedProxy reports whether a TCP peer at ip may forward client
// certificates.
func (a *authState) trustedProxy(ip net.IP) bool {
	addr, ok := netip.AddrFromSlice(ip)
	if !ok {
		return false
	}
	addr = addr.Unmap()
	for _, p := range a.proxies {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

const localsIdentity = "cipherd.identity"

// authenticate is the middleware of every route with an operation: it
// identifies the caller or answers 401, then applies the caller's rate limit.
func (s *Server) authenticate(c *fiber.Ctx) error {
	id, reason := s.identifyRequest(c)
	if id == nil {
		s.met.authFailure()
		if ce := s.log.Check(zap.DebugLevel, "authentication failed"); ce != nil {
			ce.Write(zap.String("request_id", requestID(c)), zap.String("remote", c.Context().RemoteIP().String()), zap.String("reason", reason))
		}
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="cipherd"`)
		return apiError(api.CodeUnauthenticated, "a valid bearer token or client certificate is required")
	}
	c.Locals(localsIdentity, id)
	if err := s.rateLimit(c, id); err != nil {
		return err
	}
	return c.Next()
}

// identifyRequest returns the caller, or nil and why not (for the debug log;
// never a credential).
func (s *Server) identifyRequest(c *fiber.Ctx) (*identity, string) {
	ctx := c.Context()
	forwarded := len(ctx.Request.Header.Peek(headerForwardedCert)) > 0
	if forwarded && !s.auth.trustedProxy(ctx.RemoteIP()) {
		// Only a trusted proxy may speak for a client; from anyone else
		// the header is dropped unread.
		ctx.Request.Header.Del(headerForwardedCert)
		forwarded = false
	}
	if authz := c.Get(fiber.HeaderAuthorization); authz != "" {
		scheme, tok, _ := strings.Cut(strings.TrimSpace(authz), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return nil, "unsupported authorization scheme"
		}
		if id := s.auth.identify(strings.TrimSpace(tok)); id != nil {
			return id, ""
		}
		return nil, "unknown bearer token"
	}
	if forwarded {
		id, err := s.forwardedIdentity(c)
		if err != nil {
			return nil, "forwarded client certificate: " + err.Error()
		}
		if ce := s.log.Check(zap.DebugLevel, "identity from a forwarded client certificate"); ce != nil {
			ce.Write(zap.String("proxy", ctx.RemoteIP().String()), zap.String("identity", id.name))
		}
		return id, ""
	}
	if id := s.certIdentity(c); id != nil {
		return id, ""
	}
	return nil, "no credentials"
}

// authorize checks that the caller may do op on key.
func (s *Server) authorize(c *fiber.Ctx, op Op, key string) error {
	id, _ := c.Locals(localsIdentity).(*identity)
	if id != nil && id.allowed(op, key) {
		return nil
	}
	if key == "" {
		return apiError(api.CodeForbidden, fmt.Sprintf("not allowed to %s", op))
	}
	return apiError(api.CodeForbidden, fmt.Sprintf("not allowed to %s with key %q", op, key))
}

func callerName(c *fiber.Ctx) string {
	if id, _ := c.Locals(localsIdentity).(*identity); id != nil {
		return id.name
	}
	return ""
}

// certIdentity returns the identity of the caller's verified client
// certificate, if any. A certificate the handshake did not verify against
// the client CA never counts.
func (s *Server) certIdentity(c *fiber.Ctx) *identity {
	st := c.Context().TLSConnectionState()
	if st == nil || len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return nil
	}
	return s.auth.certs[sha256.Sum256(st.PeerCertificates[0].RawSubjectPublicKeyInfo)]
}

// forwardedIdentity returns the identity of the client certificate that a
// trusted proxy forwarded. The proxy verified it; cipherd only parses it.
func (s *Server) forwardedIdentity(c *fiber.Ctx) (*identity, error) {
	all := c.Context().Request.Header.PeekAll(headerForwardedCert)
	if len(all) != 1 {
		// A proxy that adds its header line after the client's would
		// otherwise let the client's be read.
		return nil, errors.New("several header lines")
	}
	cert, err := forwardedCert(string(all[0]))
	if err != nil {
		return nil, err
	}
	id := s.auth.certs[sha256.Sum256(cert.RawSubjectPublicKeyInfo)]
	if id == nil {
		return nil, errors.New("unknown certificate key")
	}
	return id, nil
}

// headerForwardedCert carries the client certificate that a trusted proxy
// terminated TLS for.
const headerForwardedCert = "X-Forwarded-Client-Cert"

// forwardedCert parses the X-Forwarded-Client-Cert header of a trusted proxy.
// Accepted forms:
//
//   - Envoy's XFCC: one element of ;-separated key=value pairs (values may be
//     double-quoted) with the leaf certificate in Cert, as percent-encoded PEM:
//     By=spiffe://lb;Hash=…;Cert="-----BEGIN%20CERTIFICATE-----%0AMII…";Subject="CN=app"
//   - the certificate alone, as percent-encoded PEM (nginx's
//     $ssl_client_escaped_cert);
//   - base64 DER, alone or as the Cert value (HAProxy's %[ssl_c_der,base64]).
//
// Percent-decoding follows RFC 3986, so "+" is a literal plus, as in base64;
// "-----BEGIN+CERTIFICATE-----" from form encoders is tolerated. A header with
// several comma-separated elements, or several header lines, is refused: the
// proxy in front of cipherd must replace any header the client sent, not
// append to it (Envoy: forward_client_cert_details SANITIZE_SET; HAProxy:
// http-request set-header, not add-header).
func forwardedCert(v string) (*x509.Certificate, error) {
	const maxLen = 32 << 10
	v = strings.TrimSpace(v)
	if len(v) > maxLen {
		return nil, errors.New("header too long")
	}
	if strings.HasPrefix(v, "-----BEGIN") {
		return decodeForwardedCert(v)
	}
	elems := splitUnquoted(v, ',')
	if len(elems) != 1 {
		return nil, errors.New("several elements; the proxy must replace the header, not append to it")
	}
	pairs := splitUnquoted(elems[0], ';')
	for _, kv := range pairs {
		k, val, ok := strings.Cut(kv, "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "Cert") {
			return decodeForwardedCert(unquote(strings.TrimSpace(val)))
		}
	}
	if len(pairs) == 1 {
		return decodeForwardedCert(v)
	}
	return nil, errors.New("no Cert field")
}

func decodeForwardedCert(v string) (*x509.Certificate, error) {
	s, err := url.PathUnescape(v)
	if err != nil {
		return nil, errors.New("bad percent-encoding")
	}
	var der []byte
	if strings.Contains(s, "-----BEGIN") {
		s = strings.ReplaceAll(s, "-----BEGIN+", "-----BEGIN ")
		s = strings.ReplaceAll(s, "-----END+", "-----END ")
		rest := []byte(s)
		for der == nil {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				return nil, errors.New("no PEM CERTIFICATE block")
			}
			if b.Type == "CERTIFICATE" {
				der = b.Bytes
			}
		}
	} else if der, err = base64.StdEncoding.DecodeString(s); err != nil {
		return nil, errors.New("neither PEM nor base64 DER")
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, errors.New("not an X.509 certificate")
	}
	return cert, nil
}

// splitUnquoted splits s at every sep outside double quotes (in which a
// backslash escapes the next byte).
func splitUnquoted(s string, sep byte) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case quoted && s[i] == '\\':
			i++
		case s[i] == '"':
			quoted = !quoted
		case !quoted && s[i] == sep:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// unquote removes the double quotes around s and its backslash escapes.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	s = s[1 : len(s)-1]
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// writeFileAtomic writes a 0600 file through a temporary file and a rename.
func writeFileAtomic(name string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}
