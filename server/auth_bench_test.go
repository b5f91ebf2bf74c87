//go:build unix

package server

import (
	"encoding/base64"
	"path/filepath"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// BenchmarkAuthStaticToken and BenchmarkAuthJWT measure the same request
// (a 64-byte JSON encrypt through the whole app, as
// BenchmarkHandleEncryptJSON) by an identity that is not the admin, under
// the same policy, in the same configuration: known by a static token, and
// by a Kubernetes service account's token (RS256, about 1 KiB, with the
// claims a kubelet-projected token carries), verified on its first use and
// then found in jwtCache. BenchmarkAuthJWTUncached verifies the token on
// every request, for each algorithm.

const benchStaticToken = "bench-static-token-0123456789abcdef"

// benchAuthServer starts a server that knows the identity payments-api by
// benchStaticToken and by the Kubernetes service account
// payments:api, and returns it with a token of that account signed with
// alg.
func benchAuthServer(b *testing.B, alg jose.SignatureAlgorithm) (*Server, string) {
	const k8s = "https://kubernetes.default.svc.cluster.local"
	iss := newTestIssuer(b)
	iss.addKey(b, "bench", alg, true)
	file := filepath.Join(b.TempDir(), "jwks.json")
	secReplace(b, file, iss.jwks(b))
	srv := benchServer(b, Config{
		// Audit records are written, not synced: the sync of each
		// (tens of microseconds of system time, varying with the disk)
		// would bury the difference these benchmarks measure.
		AuditLog:   "/dev/null",
		JWTIssuers: []JWTIssuerConfig{{Issuer: k8s, Audiences: []string{"cipherd"}, JWKSFile: file}},
		Policies:   []PolicyConfig{{Name: "enc", Allow: []RuleConfig{{Ops: []string{"encrypt"}, Keys: []string{"default"}}}}},
		Identities: []IdentityConfig{{
			Name:        "payments-api",
			TokenSHA256: tokenSHA256(benchStaticToken),
			JWT:         &JWTMatchConfig{Issuer: k8s, Claims: map[string]string{"sub": saPayments}},
			Policies:    []string{"enc"},
		}},
	})
	now := time.Now()
	c := testClaims{Claims: jwt.Claims{
		Issuer:    k8s,
		Subject:   saPayments,
		Audience:  jwt.Audience{"cipherd"},
		Expiry:    jwt.NewNumericDate(now.Add(time.Hour)),
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		ID:        "5b8c1f1e-0d3a-4c55-9a43-3f3b4a3d8e21",
	}, Extra: map[string]any{"kubernetes.io": map[string]any{
		"namespace":      "payments",
		"node":           map[string]string{"name": "ip-10-0-113-42.eu-west-1.compute.internal", "uid": "0f6c2b9a-8f0e-4f7b-a0f5-0c1d8b0b7a11"},
		"pod":            map[string]string{"name": "api-7d9f8c6b5-x2x9z", "uid": "7e0b3c1d-64a2-4c37-8d6c-2a9c5e0f4b12"},
		"serviceaccount": map[string]string{"name": "api", "uid": "c0a8e3f4-1b2d-4e5f-9a6b-7c8d9e0f1a23"},
		"warnafter":      now.Add(time.Hour).Unix(),
	}}}
	return srv, iss.sign(b, "bench", c)
}

var benchAuthBody = []byte(`{"plaintext":"` + base64.StdEncoding.EncodeToString(make([]byte, 64)) + `"}`)

func BenchmarkAuthStaticToken(b *testing.B) {
	srv, _ := benchAuthServer(b, jose.RS256)
	b.ReportMetric(benchHandler(b, srv, benchStaticToken, benchAuthBody), "cpu-ns/op")
}

func BenchmarkAuthJWT(b *testing.B) {
	srv, tok := benchAuthServer(b, jose.RS256)
	b.ReportMetric(benchHandler(b, srv, tok, benchAuthBody), "cpu-ns/op")
	b.ReportMetric(float64(len(tok)), "token-bytes")
}

// BenchmarkIdentifyBearer measures the credential lookup alone, the part
// of BenchmarkAuthStaticToken and BenchmarkAuthJWT that differs, without
// the rest of the request and its noise.
func BenchmarkIdentifyBearer(b *testing.B) {
	srv, tok := benchAuthServer(b, jose.RS256)
	for name, tok := range map[string]string{"static": benchStaticToken, "jwt": tok} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if id, why := srv.identifyBearer(tok); id == nil {
					b.Fatal(why)
				}
			}
		})
	}
}

func BenchmarkAuthJWTUncached(b *testing.B) {
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA} {
		b.Run(string(alg), func(b *testing.B) {
			srv, tok := benchAuthServer(b, alg)
			srv.auth().jwt.cache = nil
			b.ReportMetric(benchHandler(b, srv, tok, benchAuthBody), "cpu-ns/op")
		})
	}
}
