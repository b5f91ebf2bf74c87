package server

import (
	"errors"
	"fmt"
	"path"
	"slices"
)

// Policies: which operations an identity may do on which keys.

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
	OpEncryptLocal     Op = "encrypt-local" // sealing keys, for local sealing
	OpDecryptLocal     Op = "decrypt-local" // message keys, for local opening
	OpTokensAdmin      Op = "tokens-admin"  // issue, list and revoke service tokens
	OpKeysBackup       Op = "keys-backup"   // back up a key with its material, and restore one
	OpInfoRead         Op = "info-read"     // the routes that describe the service, with protect_info_routes
)

// allOps are the operations "*" stands for in a rule.
var allOps = []Op{OpEncrypt, OpDecrypt, OpRewrap, OpDataKey, OpDataKeyPlaintext, OpKeysRead, OpKeysAdmin, OpSpeedRun, OpEncryptLocal, OpDecryptLocal, OpInfoRead}

// explicitOps must be named in a rule: "*" does not grant them. Issuing
// credentials, and taking key material out of the service, are rights no
// existing "*" rule was written to grant.
var explicitOps = []Op{OpTokensAdmin, OpKeysBackup}

// identity is an authenticated caller.
type identity struct {
	name     string
	admin    bool
	policies []*policy
	// token is set for a service token's identity (tokens.go): its
	// record, and its rate-limit bucket, which the configuration's
	// identities get from the rate limiter instead.
	token *tokenIdentity
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

// allowedSome reports whether id may do op on some key: some rule allows op
// and no rule denies it on every key ("*"). A listing needs it; it then
// shows only the keys id may op on.
func (id *identity) allowedSome(op Op) bool {
	if id.admin {
		return true
	}
	allow := false
	for _, p := range id.policies {
		for _, r := range p.deny {
			if r.ops[op] && slices.Contains(r.keys, "*") {
				return false
			}
		}
		for _, r := range p.allow {
			allow = allow || r.ops[op]
		}
	}
	return allow
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
	return slices.Contains(allOps, op) || slices.Contains(explicitOps, op)
}
