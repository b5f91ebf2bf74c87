package server

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// The service token API (tokens-admin): issue, list, revoke. A caller
// other than the admin issues tokens only with policies it holds itself,
// and a service token issues none that outlives it, so that the operation
// delegates rights and never widens them.

const (
	defaultTokenTTL = 24 * time.Hour
	minTokenTTL     = time.Minute
)

var errTokensUnsupported = apiError(api.CodeTokensUnsupported, "this keystore keeps no service tokens (a read-only keyring); use identities in the configuration")

func toAPIToken(t *cryptosvc.ServiceToken) api.Token {
	return api.Token{ID: t.ID, Name: t.Name, Policies: slices.Clone(t.Policies), CreatedAt: t.Created.UTC(), ExpiresAt: t.Expires.UTC()}
}

func (s *Server) handleCreateToken(c *fiber.Ctx, q *call) error {
	if s.tokens == nil {
		return errTokensUnsupported
	}
	var req api.CreateTokenRequest
	if err := readJSON(c, q, &req, false); err != nil {
		return err
	}
	now := s.now().Truncate(time.Second)
	rec, err := s.tokenRecord(q.id, &req, now)
	if err != nil {
		return err
	}
	var tok string
	for range 3 { // a new id on the (2^-64) chance that it is taken
		var sum [32]byte
		rec.ID, tok, sum = newServiceToken()
		rec.Hash = sum
		if err = s.tokens.CreateToken(c.UserContext(), rec); !errors.Is(err, cryptosvc.ErrTokenExists) {
			break
		}
	}
	s.audit(c, OpTokensAdmin, rec.ID, cryptosvc.Info{}, 0, err)
	if err != nil {
		return err
	}
	out := api.CreatedToken{Token: toAPIToken(rec), Secret: tok}
	return c.Status(fiber.StatusCreated).JSON(&out)
}

// tokenRecord checks a request to issue a token for issuer and returns
// the token's record, without id and hash. Messages never repeat what
// the request holds.
func (s *Server) tokenRecord(issuer *identity, req *api.CreateTokenRequest, now time.Time) (*cryptosvc.ServiceToken, error) {
	if !cryptosvc.ValidTokenName(req.Name) {
		return nil, apiError(api.CodeInvalidToken, fmt.Sprintf("name must be 1-%d characters of A-Z a-z 0-9 . _ -", cryptosvc.MaxTokenName))
	}
	if len(req.Policies) == 0 || len(req.Policies) > cryptosvc.MaxTokenPolicies {
		return nil, apiError(api.CodeInvalidToken, fmt.Sprintf("policies must name 1-%d policies of the configuration", cryptosvc.MaxTokenPolicies))
	}
	a := s.auth()
	for i, name := range req.Policies {
		p := a.policies[name]
		switch {
		case len(a.policies) == 0:
			return nil, apiError(api.CodeInvalidToken, "the configuration defines no policies, and a token holds some: add one to its policies")
		case p == nil:
			return nil, apiError(api.CodeInvalidToken, fmt.Sprintf("policies[%d] is not a policy of the configuration", i))
		case slices.Contains(req.Policies[:i], name):
			return nil, apiError(api.CodeInvalidToken, fmt.Sprintf("policies[%d] repeats an earlier one", i))
		}
		if !issuer.admin && !slices.Contains(issuer.policies, p) {
			return nil, apiError(api.CodeForbidden, "a token can hold only policies its issuer holds")
		}
	}
	ttl := min(defaultTokenTTL, s.cfg.MaxTokenTTL)
	if req.TTL != "" {
		d, err := time.ParseDuration(req.TTL)
		if err != nil || d < minTokenTTL || d > s.cfg.MaxTokenTTL {
			return nil, apiError(api.CodeInvalidToken, fmt.Sprintf("ttl must be a duration from %v to max_token_ttl (%v), such as \"24h\"", minTokenTTL, s.cfg.MaxTokenTTL))
		}
		ttl = d
	}
	exp := now.Add(ttl)
	if until := issuer.tokenExpiry(); !until.IsZero() && exp.After(until) {
		return nil, apiError(api.CodeInvalidToken, "ttl must end before the issuing token expires")
	}
	return &cryptosvc.ServiceToken{Name: req.Name, Policies: slices.Clone(req.Policies), Created: now, Expires: exp}, nil
}

// handleListTokens lists the live tokens: never a secret or a hash.
func (s *Server) handleListTokens(c *fiber.Ctx, q *call) error {
	if s.tokens == nil {
		return errTokensUnsupported
	}
	now := s.now()
	out := api.TokenList{Tokens: []api.Token{}}
	for _, t := range s.tokens.Tokens() {
		if now.Before(t.Expires) {
			out.Tokens = append(out.Tokens, toAPIToken(t))
		}
	}
	return c.JSON(&out)
}

// handleRevokeToken deletes a token: from then on this replica refuses it,
// and every other as soon as the store tells it.
func (s *Server) handleRevokeToken(c *fiber.Ctx, q *call) error {
	if s.tokens == nil {
		return errTokensUnsupported
	}
	id := q.param
	if !cryptosvc.ValidTokenID(id) {
		return apiError(api.CodeTokenNotFound, "no such service token")
	}
	err := s.tokens.DeleteToken(c.UserContext(), id)
	s.audit(c, OpTokensAdmin, id, cryptosvc.Info{}, 0, err)
	if err != nil {
		return err
	}
	s.tokenIDs.m.Delete(id)
	return c.SendStatus(fiber.StatusNoContent)
}
