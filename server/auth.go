package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/zap"

	"github.com/cipherd/cipherd/api"
)

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
	keys []string
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
// rule denies it. The admin may do everything.
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

// authState holds the credentials: token hashes to identities.
type authState struct {
	admin     [sha256.Size]byte
	tokens    map[[sha256.Size]byte]*identity
	certs     map[[sha256.Size]byte]*identity
	generated string // admin token generated on this start, shown once
}

const adminTokenFile = "admin-token.sha256"

func newAuth(cfg *Config, log *zap.Logger) (*authState, error) {
	a := &authState{tokens: map[[sha256.Size]byte]*identity{}, certs: map[[sha256.Size]byte]*identity{}}
	switch {
	case cfg.AdminToken != "":
		a.admin = sha256.Sum256([]byte(cfg.AdminToken))
	default:
		file := filepath.Join(cfg.DataDir, adminTokenFile)
		if b, err := os.ReadFile(file); err == nil {
			h, err := hex.DecodeString(strings.TrimSpace(string(b)))
			if err != nil || len(h) != sha256.Size {
				return nil, fmt.Errorf("server: %s is damaged", file)
			}
			copy(a.admin[:], h)
		} else if errors.Is(err, os.ErrNotExist) {
			var raw [32]byte
			rand.Read(raw[:])
			tok := "cdadm_" + base64.RawURLEncoding.EncodeToString(raw[:])
			a.admin = sha256.Sum256([]byte(tok))
			if err := writeFileAtomic(file, []byte(hex.EncodeToString(a.admin[:])+"\n")); err != nil {
				return nil, fmt.Errorf("server: storing the admin token hash: %w", err)
			}
			a.generated = tok
			log.Warn("generated an admin token; it is shown once on standard error and stored only hashed", zap.String("file", file))
		} else {
			return nil, fmt.Errorf("server: reading %s: %w", file, err)
		}
	}
	policies := map[string]*policy{}
	for _, pc := range cfg.Policies {
		p := &policy{name: pc.Name}
		for i, list := range [][]RuleConfig{pc.Allow, pc.Deny} {
			for _, rc := range list {
				r := rule{ops: map[Op]bool{}, keys: rc.Keys}
				for _, o := range rc.Ops {
					if o == "*" {
						for _, op := range allOps {
							r.ops[op] = true
						}
						continue
					}
					if !validOp(Op(o)) {
						return nil, fmt.Errorf("server: policy %s: unknown operation %q", pc.Name, o)
					}
					r.ops[Op(o)] = true
				}
				for _, k := range rc.Keys {
					if _, err := path.Match(k, ""); err != nil {
						return nil, fmt.Errorf("server: policy %s: bad key pattern %q", pc.Name, k)
					}
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
	for _, ic := range cfg.Identities {
		id := &identity{name: ic.Name}
		for _, pn := range ic.Policies {
			p := policies[pn]
			if p == nil {
				return nil, fmt.Errorf("server: identity %s: no policy %q", ic.Name, pn)
			}
			id.policies = append(id.policies, p)
		}
		for _, h := range []struct {
			hex string
			m   map[[sha256.Size]byte]*identity
		}{{ic.TokenSHA256, a.tokens}, {ic.CertSHA256, a.certs}} {
			if h.hex == "" {
				continue
			}
			b, err := hex.DecodeString(h.hex)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("server: identity %s: hashes are 64 hex characters", ic.Name)
			}
			h.m[[sha256.Size]byte(b)] = id
		}
	}
	return a, nil
}

func validOp(op Op) bool {
	for _, o := range allOps {
		if o == op {
			return true
		}
	}
	return false
}

var adminIdentity = &identity{name: "admin", admin: true}

// identify returns the caller presenting bearer token tok, or nil. Token
// hashes are compared in constant time.
func (a *authState) identify(tok string) *identity {
	if tok == "" {
		return nil
	}
	h := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(h[:], a.admin[:]) == 1 {
		return adminIdentity
	}
	// The map lookup is on the hash of a secret, not the secret: timing
	// reveals nothing useful about other tokens.
	return a.tokens[h]
}

const localsIdentity = "cipherd.identity"

// authenticate is the middleware of every /v1 route and /speed/run: it
// identifies the caller or answers 401.
func (s *Server) authenticate(c *fiber.Ctx) error {
	tok, ok := strings.CutPrefix(c.Get(fiber.HeaderAuthorization), "Bearer ")
	var id *identity
	if ok {
		id = s.auth.identify(strings.TrimSpace(tok))
	}
	if id == nil {
		id = s.certIdentity(c)
	}
	if id == nil {
		s.met.authFailure()
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="cipherd"`)
		return apiError(api.CodeUnauthenticated, "a valid bearer token or client certificate is required")
	}
	c.Locals(localsIdentity, id)
	return c.Next()
}

// authorize checks that the caller may do op on key.
func (s *Server) authorize(c *fiber.Ctx, op Op, key string) error {
	id, _ := c.Locals(localsIdentity).(*identity)
	if id == nil || !id.allowed(op, key) {
		return apiError(api.CodeForbidden, fmt.Sprintf("not allowed to %s with key %q", op, key))
	}
	return nil
}

func callerName(c *fiber.Ctx) string {
	if id, _ := c.Locals(localsIdentity).(*identity); id != nil {
		return id.name
	}
	return ""
}

// certIdentity returns the identity of the caller's verified client
// certificate, if any.
func (s *Server) certIdentity(c *fiber.Ctx) *identity {
	st := c.Context().TLSConnectionState()
	if st == nil || len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return nil
	}
	return s.auth.certs[sha256.Sum256(st.PeerCertificates[0].RawSubjectPublicKeyInfo)]
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
