package client

import (
	"context"
	"net/http"
	"strings"

	"github.com/cipherd/cipherd/api"
)

// Service tokens (/v1/tokens): bearer tokens the service issues with a
// lifetime and policies of its configuration, and revokes. The caller needs
// the operation tokens-admin.

// CreateToken issues a service token. The answer holds the token itself
// (Secret), this once: the service keeps only its hash.
func (c *Client) CreateToken(ctx context.Context, req api.CreateTokenRequest) (*api.CreatedToken, error) {
	var out api.CreatedToken
	if err := c.do(ctx, http.MethodPost, c.url(api.RouteTokens, ""), &req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListTokens returns the live service tokens, by creation: their ids,
// names, policies and times, never a token.
func (c *Client) ListTokens(ctx context.Context) ([]api.Token, error) {
	var out api.TokenList
	if err := c.do(ctx, http.MethodGet, c.url(api.RouteTokens, ""), nil, &out); err != nil {
		return nil, err
	}
	return out.Tokens, nil
}

// RevokeToken deletes the service token of id, which is refused from then
// on. An id of no live token is token_not_found.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	if !validTokenID(id) {
		// The service answers the same to an id of another form; the
		// message does not repeat it, which may be a whole token given
		// by mistake.
		return &Error{API: api.Error{Code: api.CodeTokenNotFound, Message: "a token id is 16 lowercase hex digits: the <id> of cdt_<id>_<secret>, not the token"}}
	}
	u := c.base.String() + strings.Replace(api.RouteToken, ":id", id, 1)
	return c.do(ctx, http.MethodDelete, u, nil, nil)
}

// validTokenID reports whether id has the form of a token id, so that
// nothing else can change the meaning of the path.
func validTokenID(id string) bool {
	if len(id) != 16 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if ch := id[i]; !('0' <= ch && ch <= '9' || 'a' <= ch && ch <= 'f') {
			return false
		}
	}
	return true
}
