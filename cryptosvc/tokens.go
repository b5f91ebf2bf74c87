package cryptosvc

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Service tokens are bearer credentials that an administrator issues
// through the API with a lifetime and a set of policies, and may revoke
// before it ends. The server makes and checks them; a store keeps their
// records, which hold the SHA-256 of the token, never the token.
// Stores that share a backend (PostgreSQL) make every replica learn of a
// new or revoked token; every store serves lookups from memory, so that
// authenticating a request reads no file and queries no database.

// ServiceToken is the record of an issued service token.
type ServiceToken struct {
	// ID names the token in lists, logs and revocations: 16 lowercase hex
	// digits. It is not secret.
	ID string
	// Hash is the SHA-256 of the whole token (the bearer string).
	Hash [sha256.Size]byte
	// Name is a label for people, 1–64 characters of A–Z a–z 0–9 . _ -.
	Name string
	// Policies are the names of the server's policies the token holds.
	Policies []string
	// Created and Expires bound the token's life; it is refused from
	// Expires on.
	Created time.Time
	Expires time.Time
}

// Token limits that stores enforce.
const (
	TokenIDLen       = 16
	MaxTokenName     = 64
	MaxTokenPolicies = 64
	maxPolicyName    = 128
)

// Validate checks a token record before a store writes it; errors wrap
// ErrInvalidConfig.
func (t *ServiceToken) Validate() error {
	switch {
	case !ValidTokenID(t.ID):
		return fmt.Errorf("%w: a token id is %d lowercase hex digits", ErrInvalidConfig, TokenIDLen)
	case !ValidTokenName(t.Name):
		return fmt.Errorf("%w: a token name is 1-%d characters of A-Z a-z 0-9 . _ -", ErrInvalidConfig, MaxTokenName)
	case len(t.Policies) == 0 || len(t.Policies) > MaxTokenPolicies:
		return fmt.Errorf("%w: a token holds 1-%d policies", ErrInvalidConfig, MaxTokenPolicies)
	case t.Created.IsZero() || !t.Expires.After(t.Created):
		return fmt.Errorf("%w: a token expires after it is created", ErrInvalidConfig)
	}
	for _, p := range t.Policies {
		if p == "" || len(p) > maxPolicyName || strings.ContainsAny(p, "\x00\n") {
			return fmt.Errorf("%w: a policy name is 1-%d bytes", ErrInvalidConfig, maxPolicyName)
		}
	}
	return nil
}

// ValidTokenID reports whether id has the form of a token id.
func ValidTokenID(id string) bool {
	if len(id) != TokenIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ValidTokenName reports whether name is a valid token name.
func ValidTokenName(name string) bool {
	if name == "" || len(name) > MaxTokenName {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// A TokenStore is a Keystore that also keeps service tokens, in the same
// backend as the keys: FileStore, MemStore and the PostgreSQL store. A
// read-only keyring keeps none. Token and Tokens read memory only.
type TokenStore interface {
	// CreateToken stores t (Validate first). It fails with ErrTokenExists
	// if a token has t's ID.
	CreateToken(ctx context.Context, t *ServiceToken) error
	// DeleteToken removes (revokes) the token id, or fails with
	// ErrTokenNotFound. Once it returns, Token no longer finds it.
	DeleteToken(ctx context.Context, id string) error
	// DeleteExpiredTokens removes the tokens whose Expires is before or
	// at before, and returns how many it removed.
	DeleteExpiredTokens(ctx context.Context, before time.Time) (int, error)
	// Token returns the token id from memory, or nil. The record is
	// shared: do not modify it.
	Token(id string) *ServiceToken
	// Tokens returns every token in memory, expired ones included, by
	// creation time.
	Tokens() []*ServiceToken
}

// TokenSet is the in-memory set of service tokens of a TokenStore, for
// implementations outside this package. Reads take no lock: each change
// replaces an immutable snapshot, as tokens change at the pace of an
// administrator and are read on every request.
//
// A removed token's id is remembered until the token would have expired
// (Remove), so that a read of the backend that started before the removal
// and ends after it cannot bring the token back. Ids are random and never
// reused, so remembering one never refuses a new token.
type TokenSet struct {
	mu   sync.Mutex // serializes changes
	snap atomic.Pointer[tokenSnapshot]
	now  func() time.Time
}

type tokenSnapshot struct {
	byID map[string]*ServiceToken
	gone map[string]time.Time // removed ids, until when to remember them
}

// goneHold is how long a removed token unknown to memory, whose expiry is
// therefore unknown, is remembered: longer than any read of the backend
// takes.
const goneHold = 10 * time.Minute

// Token returns the token id, or nil.
func (s *TokenSet) Token(id string) *ServiceToken {
	if p := s.snap.Load(); p != nil {
		return p.byID[id]
	}
	return nil
}

// Tokens returns every token, by creation time (then id).
func (s *TokenSet) Tokens() []*ServiceToken {
	p := s.snap.Load()
	if p == nil {
		return nil
	}
	out := slices.Collect(maps.Values(p.byID))
	slices.SortFunc(out, func(a, b *ServiceToken) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Seen reports whether the set holds the token id or remembers its
// removal: a new token must not take that id.
func (s *TokenSet) Seen(id string) bool {
	p := s.snap.Load()
	if p == nil {
		return false
	}
	_, gone := p.gone[id]
	return p.byID[id] != nil || gone
}

// Len returns the number of tokens.
func (s *TokenSet) Len() int {
	if p := s.snap.Load(); p != nil {
		return len(p.byID)
	}
	return 0
}

// Add adds tokens, except those whose ids were removed.
func (s *TokenSet) Add(ts ...*ServiceToken) {
	s.change(func(n *tokenSnapshot) {
		for _, t := range ts {
			if _, gone := n.gone[t.ID]; !gone {
				n.byID[t.ID] = t
			}
		}
	})
}

// Remove removes the tokens ids and remembers them.
func (s *TokenSet) Remove(ids ...string) {
	now := s.clock()
	s.change(func(n *tokenSnapshot) {
		for _, id := range ids {
			until := now.Add(goneHold)
			if t := n.byID[id]; t != nil && t.Expires.After(until) {
				until = t.Expires
			}
			n.gone[id] = until
			delete(n.byID, id)
		}
	})
}

// Replace makes the set hold exactly ts (a whole read of the backend),
// except the tokens removed meanwhile.
func (s *TokenSet) Replace(ts []*ServiceToken) {
	s.change(func(n *tokenSnapshot) {
		clear(n.byID)
		for _, t := range ts {
			if _, gone := n.gone[t.ID]; !gone {
				n.byID[t.ID] = t
			}
		}
	})
}

// change applies fn to a copy of the snapshot, forgetting removed ids
// whose time has passed, and publishes the copy.
func (s *TokenSet) change(fn func(*tokenSnapshot)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := &tokenSnapshot{byID: map[string]*ServiceToken{}, gone: map[string]time.Time{}}
	if cur := s.snap.Load(); cur != nil {
		maps.Copy(next.byID, cur.byID)
		now := s.clock()
		for id, until := range cur.gone {
			if until.After(now) {
				next.gone[id] = until
			}
		}
	}
	fn(next)
	s.snap.Store(next)
}

func (s *TokenSet) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}
