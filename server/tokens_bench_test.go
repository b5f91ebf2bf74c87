package server

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/cipherd/cipherd/cryptosvc"
)

// BenchmarkIdentifyServiceToken measures what identifying a bearer token
// costs on the request path, as identifyBearer does it, for a static token
// and a service token: the token's hash, compared with the configured
// tokens' (the admin's and three identities', each in constant time), then,
// for a service token, which none of them is, a lookup of its id in the
// store's memory among 10,000 live tokens and one more comparison.
func BenchmarkIdentifyServiceToken(b *testing.B) {
	s, tok := benchTokenServer(b)
	b.Run("static", func(b *testing.B) { benchIdentify(b, s, tokOrders) })
	b.Run("service", func(b *testing.B) { benchIdentify(b, s, tok) })
}

func benchIdentify(b *testing.B, s *Server, tok string) {
	b.ReportAllocs()
	for b.Loop() {
		sum := tokenSum(tok)
		id := s.auth().identifyHash(sum)
		if id == nil {
			id = s.serviceTokenIdentity(tok, sum)
		}
		if id == nil {
			b.Fatal("not identified")
		}
	}
}

// benchTokenServer returns a server with policyTestConfig's identities and
// 10,000 service tokens in a MemStore, and one of the tokens.
func benchTokenServer(b *testing.B) (*Server, string) {
	store := cryptosvc.NewMemStore()
	cfg := policyTestConfig()
	cfg.DataDir, cfg.Keystore, cfg.AdminToken, cfg.Logger = b.TempDir(), store, "bench-admin-token", zap.NewNop()
	s, err := New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Shutdown(context.Background()) })
	now := time.Now()
	var tok string
	for i := range 10000 {
		id, t, sum := newServiceToken()
		rec := &cryptosvc.ServiceToken{ID: id, Hash: sum, Name: "bench", Policies: []string{"orders"}, Created: now, Expires: now.Add(time.Hour)}
		if err := store.CreateToken(context.Background(), rec); err != nil {
			b.Fatal(err)
		}
		if i == 5000 {
			tok = t
		}
	}
	return s, tok
}
