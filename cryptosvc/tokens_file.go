package cryptosvc

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"time"
)

// Service tokens in the file keystore and in MemStore. The file keystore
// keeps them in dir/tokens.json, rewritten whole and atomically on every
// change (issue, revoke, removal of expired ones): tokens change at the
// pace of an administrator, and one file keeps the set consistent after a
// crash. The file holds hashes, names, policies and times, nothing secret,
// so it is not sealed; like the hashed admin token in the data directory,
// it is protected by the directory's permissions (0700, files 0600).
//
//	{"v":1,"tokens":[{"id":"<16 hex>","sha256":"<64 hex>","name":"ci",
//	  "policies":["encrypt-orders"],"created":"<RFC 3339>","expires":"<RFC 3339>"}]}
//
// Unknown versions, unknown fields and trailing bytes are rejected.

const ksTokensFile = "tokens.json"

var (
	_ TokenStore = (*FileStore)(nil)
	_ TokenStore = (*MemStore)(nil)
)

type ksTokensDoc struct {
	V      int             `json:"v"`
	Tokens []ksTokenRecord `json:"tokens"`
}

type ksTokenRecord struct {
	ID       string    `json:"id"`
	SHA256   string    `json:"sha256"`
	Name     string    `json:"name"`
	Policies []string  `json:"policies"`
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires"`
}

// Token returns the token id from memory, or nil.
func (s *keySet) Token(id string) *ServiceToken { return s.tokens.Token(id) }

// Tokens returns every token in memory, by creation time.
func (s *keySet) Tokens() []*ServiceToken { return s.tokens.Tokens() }

// CreateToken stores a copy of t.
func (s *MemStore) CreateToken(ctx context.Context, t *ServiceToken) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next, err := tokensWith(&s.tokens, t)
	if err != nil {
		return err
	}
	s.tokens.Add(next)
	return nil
}

// DeleteToken removes the token id.
func (s *MemStore) DeleteToken(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tokens.Token(id) == nil {
		return ErrTokenNotFound
	}
	s.tokens.Remove(id)
	return nil
}

// DeleteExpiredTokens removes the tokens expired by before.
func (s *MemStore) DeleteExpiredTokens(ctx context.Context, before time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := expiredTokens(&s.tokens, before)
	s.tokens.Remove(ids...)
	return len(ids), nil
}

// CreateToken writes tokens.json with t added, then adds t to memory.
func (s *FileStore) CreateToken(ctx context.Context, t *ServiceToken) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.ksWritable(ctx); err != nil {
		return err
	}
	nt, err := tokensWith(&s.tokens, t)
	if err != nil {
		return err
	}
	if err := s.ksWriteTokens(append(s.tokens.Tokens(), nt)); err != nil {
		return err
	}
	s.tokens.Add(nt)
	return nil
}

// DeleteToken writes tokens.json without the token id, then removes it
// from memory.
func (s *FileStore) DeleteToken(ctx context.Context, id string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.ksWritable(ctx); err != nil {
		return err
	}
	if s.tokens.Token(id) == nil {
		return ErrTokenNotFound
	}
	return s.ksRemoveTokens([]string{id})
}

// DeleteExpiredTokens rewrites tokens.json without the tokens expired by
// before; it writes nothing when there are none.
func (s *FileStore) DeleteExpiredTokens(ctx context.Context, before time.Time) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.ksWritable(ctx); err != nil {
		return 0, err
	}
	ids := expiredTokens(&s.tokens, before)
	if len(ids) == 0 {
		return 0, nil
	}
	return len(ids), s.ksRemoveTokens(ids)
}

// ksRemoveTokens writes the file without ids, then drops them from
// memory. A failed write leaves both as they were: the revocation failed
// and says so.
func (s *FileStore) ksRemoveTokens(ids []string) error {
	keep := slices.DeleteFunc(s.tokens.Tokens(), func(t *ServiceToken) bool { return slices.Contains(ids, t.ID) })
	if err := s.ksWriteTokens(keep); err != nil {
		return err
	}
	s.tokens.Remove(ids...)
	return nil
}

func (s *FileStore) ksWriteTokens(ts []*ServiceToken) error {
	doc := ksTokensDoc{V: 1, Tokens: make([]ksTokenRecord, 0, len(ts))}
	for _, t := range ts {
		doc.Tokens = append(doc.Tokens, ksTokenRecord{ID: t.ID, SHA256: hex.EncodeToString(t.Hash[:]), Name: t.Name,
			Policies: t.Policies, Created: t.Created.UTC(), Expires: t.Expires.UTC()})
	}
	b, err := json.Marshal(&doc)
	if err != nil {
		return err
	}
	if err := ksWriteFileAtomic(s.dir, ksTokensFile, append(b, '\n')); err != nil {
		return fmt.Errorf("cryptosvc: keystore: writing the service tokens: %w", err)
	}
	return nil
}

// ksLoadTokens reads tokens.json, if there is one, into memory.
func (s *FileStore) ksLoadTokens() error {
	path := filepath.Join(s.dir, ksTokensFile)
	data, err := ksReadSmall(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cryptosvc: keystore: %w", err)
	}
	var doc ksTokensDoc
	if err := ksUnmarshalStrict(data, &doc, ErrMalformed); err != nil {
		return fmt.Errorf("cryptosvc: keystore file %s: %w", path, err)
	}
	if doc.V != 1 {
		return fmt.Errorf("cryptosvc: keystore file %s: %w: version %d", path, ErrUnsupported, doc.V)
	}
	var ts []*ServiceToken
	for _, r := range doc.Tokens {
		t := &ServiceToken{ID: r.ID, Name: r.Name, Policies: r.Policies, Created: r.Created, Expires: r.Expires}
		if n, err := hex.Decode(t.Hash[:], []byte(r.SHA256)); err != nil || n != len(t.Hash) || len(r.SHA256) != 2*len(t.Hash) {
			return fmt.Errorf("cryptosvc: keystore file %s: %w: token %s: sha256 is not 64 hex digits", path, ErrMalformed, r.ID)
		}
		if err := t.Validate(); err != nil {
			return fmt.Errorf("cryptosvc: keystore file %s: %w", path, err)
		}
		ts = append(ts, t)
	}
	s.tokens.Replace(ts)
	return nil
}

// tokensWith validates t against the set and returns the copy to store.
func tokensWith(set *TokenSet, t *ServiceToken) (*ServiceToken, error) {
	if t == nil {
		return nil, fmt.Errorf("%w: nil token", ErrInvalidConfig)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if set.Seen(t.ID) {
		return nil, ErrTokenExists
	}
	c := *t
	c.Policies = slices.Clone(t.Policies)
	return &c, nil
}

// expiredTokens returns the ids of the tokens expired by before.
func expiredTokens(set *TokenSet, before time.Time) []string {
	var ids []string
	for _, t := range set.Tokens() {
		if !t.Expires.After(before) {
			ids = append(ids, t.ID)
		}
	}
	return ids
}
