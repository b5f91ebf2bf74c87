package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cipherd/cipherd/cryptosvc"
)

// Service tokens (cryptosvc.TokenStore) live in cipherd_tokens, one row
// per live token, and in every replica's memory, which serves Token and
// Tokens: authenticating a request never queries the database, and during
// an outage the tokens a replica knows keep working until they expire.
//
// Every write commits a notification on the channel cipherd_tokens in its
// transaction: "+ <id>" for a new token, "- <id>" for a removed one. A
// replica applies "- <id>" without a query, so a revocation reaches every
// listening replica in the time a notification takes; "+ <id>" reads the
// row. A reconnection re-reads the whole table (catchUp), so a revocation
// made while a replica was cut off applies when it is back.

// tokenChannel is the NOTIFY channel of token changes.
const tokenChannel = "cipherd_tokens"

var _ cryptosvc.TokenStore = (*Store)(nil)

const tokenRows = `SELECT id, sha256, name, policies, created, expires FROM cipherd_tokens`

// Token returns the token id from memory, or nil.
func (s *Store) Token(id string) *cryptosvc.ServiceToken { return s.tokens.Token(id) }

// Tokens returns every token in memory, by creation time.
func (s *Store) Tokens() []*cryptosvc.ServiceToken { return s.tokens.Tokens() }

// CreateToken inserts t and notifies every replica.
func (s *Store) CreateToken(ctx context.Context, t *cryptosvc.ServiceToken) error {
	if s.snap.Load() == nil {
		return cryptosvc.ErrClosed
	}
	if t == nil {
		return fmt.Errorf("%w: nil token", cryptosvc.ErrInvalidConfig)
	}
	if err := t.Validate(); err != nil {
		return err
	}
	if s.tokens.Seen(t.ID) {
		return cryptosvc.ErrTokenExists
	}
	c := *t
	c.Policies = slices.Clone(t.Policies)
	ctx, cancel := context.WithTimeout(ctx, s.opTO)
	defer cancel()
	err := s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
INSERT INTO cipherd_tokens (id, sha256, name, policies, created, expires) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (id) DO NOTHING`, c.ID, c.Hash[:], c.Name, c.Policies, c.Created, c.Expires)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return cryptosvc.ErrTokenExists
		}
		return notifyToken(ctx, tx, "+", c.ID)
	})
	if err != nil {
		return err
	}
	s.tokens.Add(&c)
	return nil
}

// DeleteToken deletes the token id and notifies every replica.
func (s *Store) DeleteToken(ctx context.Context, id string) error {
	if s.snap.Load() == nil {
		return cryptosvc.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, s.opTO)
	defer cancel()
	found := false
	err := s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM cipherd_tokens WHERE id = $1`, id)
		if err != nil {
			return err
		}
		if found = tag.RowsAffected() > 0; !found {
			return nil
		}
		return notifyToken(ctx, tx, "-", id)
	})
	if err != nil {
		return err
	}
	// Gone from the database either way: memory follows it.
	s.tokens.Remove(id)
	if !found {
		return cryptosvc.ErrTokenNotFound
	}
	return nil
}

// DeleteExpiredTokens deletes the tokens expired by before.
func (s *Store) DeleteExpiredTokens(ctx context.Context, before time.Time) (int, error) {
	if s.snap.Load() == nil {
		return 0, cryptosvc.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, s.opTO)
	defer cancel()
	var ids []string
	err := s.tx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `DELETE FROM cipherd_tokens WHERE expires <= $1 RETURNING id`, before)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, id := range ids {
			if err := notifyToken(ctx, tx, "-", id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	s.tokens.Remove(ids...)
	return len(ids), nil
}

func notifyToken(ctx context.Context, tx pgx.Tx, op, id string) error {
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, tokenChannel, op+" "+id)
	return err
}

// tokenNotified applies one notification of cipherd_tokens.
func (s *Store) tokenNotified(payload string) error {
	op, id, ok := strings.Cut(payload, " ")
	if !ok || !cryptosvc.ValidTokenID(id) {
		return nil // not ours
	}
	switch op {
	case "-":
		s.tokens.Remove(id)
	case "+":
		if s.tokens.Seen(id) {
			return nil // this replica's own, or already removed
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.opTO)
		defer cancel()
		ts, err := s.loadTokens(ctx, `WHERE id = $1`, id)
		if err != nil {
			return err
		}
		// Absent: deleted since; its "-" follows.
		s.tokens.Add(ts...)
	}
	return nil
}

// loadTokens reads the tokens of a WHERE clause (or all of them).
func (s *Store) loadTokens(ctx context.Context, where string, args ...any) ([]*cryptosvc.ServiceToken, error) {
	rows, err := s.pool.Query(ctx, tokenRows+" "+where, args...)
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	var out []*cryptosvc.ServiceToken
	for rows.Next() {
		t := new(cryptosvc.ServiceToken)
		var sum []byte
		if err := rows.Scan(&t.ID, &sum, &t.Name, &t.Policies, &t.Created, &t.Expires); err != nil {
			return nil, classify(err)
		}
		if len(sum) != len(t.Hash) {
			return nil, errors.New("pgstore: a token's sha256 is not 32 bytes")
		}
		copy(t.Hash[:], sum)
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("pgstore: token %s: %w", t.ID, err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	return out, nil
}
