package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/client"
	"github.com/cipherd/cipherd/server"
)

// The admin issues a service token, which works at once with its policy
// alone, is listed without its secret, and is refused once revoked.
func TestClientTokens(t *testing.T) {
	url, _ := startServerConfig(t, server.Config{
		Policies: []server.PolicyConfig{
			{Name: "enc", Allow: []server.RuleConfig{{Ops: []string{"encrypt"}, Keys: []string{"default"}}}},
			{Name: "read", Allow: []server.RuleConfig{{Ops: []string{"keys-read"}, Keys: []string{"*"}}}},
		},
	})
	admin := newClient(t, url)
	ctx := context.Background()

	tok, err := admin.CreateToken(ctx, api.CreateTokenRequest{Name: "ci-deploy", Policies: []string{"enc", "read"}, TTL: "2h"})
	if err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	if !strings.HasPrefix(tok.Secret, "cdt_"+tok.ID+"_") || len(tok.ID) != 16 || tok.Name != "ci-deploy" ||
		len(tok.Policies) != 2 || tok.ExpiresAt.Sub(tok.CreatedAt) != 2*time.Hour {
		t.Fatalf("CreateToken: %+v", tok.Token)
	}
	svc, err := client.New(url, client.WithToken(tok.Secret))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Encrypt(ctx, "default", []byte("hello"), nil); err != nil {
		t.Fatalf("Encrypt with the service token: %v", err)
	}
	if _, err := svc.Decrypt(ctx, "default", []byte("x"), nil); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("Decrypt, which no policy of the token allows: %v", err)
	}
	if _, err := svc.ListTokens(ctx); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("ListTokens without tokens-admin: %v", err)
	}

	list, err := admin.ListTokens(ctx)
	if err != nil || len(list) != 1 || list[0].ID != tok.ID || list[0].Name != "ci-deploy" || !list[0].ExpiresAt.Equal(tok.ExpiresAt) {
		t.Fatalf("ListTokens: %+v, %v", list, err)
	}

	for _, req := range []api.CreateTokenRequest{
		{Name: "no-policy"},
		{Name: "unknown-policy", Policies: []string{"nonesuch"}},
		{Name: "bad-ttl", Policies: []string{"enc"}, TTL: "1s"},
		{Name: "bad name", Policies: []string{"enc"}},
	} {
		if _, err := admin.CreateToken(ctx, req); !client.IsCode(err, api.CodeInvalidToken) {
			t.Errorf("CreateToken %+v: %v, want invalid_token_request", req, err)
		}
	}

	if err := admin.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatalf("RevokeToken: %v", err)
	}
	if _, err := svc.Encrypt(ctx, "default", []byte("hello"), nil); !errors.Is(err, client.ErrUnauthenticated) {
		t.Fatalf("Encrypt with the revoked token: %v", err)
	}
	if list, err := admin.ListTokens(ctx); err != nil || len(list) != 0 {
		t.Fatalf("ListTokens after the revocation: %+v, %v", list, err)
	}
	var ce *client.Error
	if err := admin.RevokeToken(ctx, tok.ID); !errors.As(err, &ce) || ce.Status != 404 || ce.Code() != api.CodeTokenNotFound {
		t.Fatalf("RevokeToken twice: %v", err)
	}

	// Ids that could change the path never leave the client, and a whole
	// token given for its id is not repeated in the error.
	for _, bad := range []string{"", "..", "../keys", "3F9C0A7D12E4B856", "3f9c0a7d12e4b85", tok.Secret} {
		err := admin.RevokeToken(ctx, bad)
		if !errors.As(err, &ce) || ce.Status != 0 || ce.Code() != api.CodeTokenNotFound {
			t.Errorf("RevokeToken(%q): %v", bad, err)
		}
		if strings.Contains(err.Error(), tok.Secret) {
			t.Errorf("the error repeats the token: %v", err)
		}
	}
}
