package server

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/cryptosvc/pgstore"
	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/pgtest"
)

// TestTokensPostgresReplicas runs three servers on one PostgreSQL
// keystore, as three replicas of a fleet: a token issued on one works on
// the others; a revocation on one is refused by the other two within a
// second; and with the database killed, the tokens every replica knows
// keep working, revocations made before stay in force, and tokens expire
// on time.
func TestTokensPostgresReplicas(t *testing.T) {
	db := pgtest.Start(t) // its own: the test kills it
	dsn := db.Database(t)
	root := keystoretest.Secret(t)
	clock := newTokenClock()
	var (
		rs     []*testServer
		stores []*pgstore.Store
	)
	for range 3 {
		st, err := pgstore.Open(context.Background(), pgstore.Config{DSN: dsn, RootKey: &root, ReconnectMax: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() }) // after the server's Shutdown
		cfg := tokenTestConfig(clock)
		cfg.Keystore = st
		rs = append(rs, startTestServer(t, cfg))
		stores = append(stores, st)
	}
	if _, err := rs[0].Service().CreateKey(context.Background(), "orders-1", cryptosvc.KeyConfig{}); err != nil {
		t.Fatal(err)
	}

	// waitAll polls every replica but from until each answers want to an
	// encrypt with tok, and returns how long the slowest took.
	waitAll := func(from int, tok string, want int, start time.Time, limit time.Duration) time.Duration {
		t.Helper()
		var slowest time.Duration
		for i, r := range rs {
			if i == from {
				continue
			}
			for {
				code := encryptAs(t, r.URL, tok, "orders-1")
				if code == want {
					slowest = max(slowest, time.Since(start))
					break
				}
				if time.Since(start) > limit {
					t.Fatalf("replica %d answers %d, not %d, %v after the change on replica %d", i, code, want, time.Since(start), from)
				}
				time.Sleep(time.Millisecond)
			}
		}
		return slowest
	}

	var issued, revoked []time.Duration
	for round := range 6 {
		from := round % 3
		start := time.Now()
		tk := issueToken(t, rs[from].URL, rs[from].Token, api.CreateTokenRequest{Name: "app", Policies: []string{"orders"}})
		issued = append(issued, waitAll(from, tk.Secret, 200, start, 5*time.Second))
		by := (from + 1) % 3
		start = time.Now()
		if r := secMustSend(t, plainClient, "DELETE", rs[by].URL+"/v1/tokens/"+tk.ID, rs[by].Token, nil); r.code != 204 {
			t.Fatalf("revoke on replica %d: %d %s", by, r.code, r.body)
		}
		if code := encryptAs(t, rs[by].URL, tk.Secret, "orders-1"); code != 401 {
			t.Fatalf("the revoking replica still accepts the token: %d", code)
		}
		revoked = append(revoked, waitAll(by, tk.Secret, 401, start, time.Second))
	}
	sortDurations(issued)
	sortDurations(revoked)
	t.Logf("issue seen by every other replica after %v (median) … %v (max) over %d rounds", issued[len(issued)/2], issued[len(issued)-1], len(issued))
	t.Logf("revocation refused by every other replica after %v (median) … %v (max), including the revoking request", revoked[len(revoked)/2], revoked[len(revoked)-1])

	// The outage.
	live := issueToken(t, rs[0].URL, rs[0].Token, api.CreateTokenRequest{Name: "live", Policies: []string{"orders"}, TTL: "10m"})
	gone := issueToken(t, rs[1].URL, rs[1].Token, api.CreateTokenRequest{Name: "gone", Policies: []string{"orders"}, TTL: "10m"})
	waitAll(0, live.Secret, 200, time.Now(), 5*time.Second)
	waitAll(1, gone.Secret, 200, time.Now(), 5*time.Second)
	if r := secMustSend(t, plainClient, "DELETE", rs[2].URL+"/v1/tokens/"+gone.ID, rs[2].Token, nil); r.code != 204 {
		t.Fatalf("revoke: %d %s", r.code, r.body)
	}
	waitAll(2, gone.Secret, 401, time.Now(), time.Second)
	db.Kill(t)
	for i, st := range stores {
		deadline := time.Now().Add(15 * time.Second)
		for st.Health() == nil {
			if time.Now().After(deadline) {
				t.Fatalf("replica %d still reports a healthy database", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for i, r := range rs {
		if code := encryptAs(t, r.URL, live.Secret, "orders-1"); code != 200 {
			t.Fatalf("replica %d during the outage, a known token: %d", i, code)
		}
		if code := encryptAs(t, r.URL, gone.Secret, "orders-1"); code != 401 {
			t.Fatalf("replica %d during the outage, a token revoked before it: %d", i, code)
		}
	}
	if r := secMustSend(t, plainClient, "DELETE", rs[1].URL+"/v1/tokens/"+live.ID, rs[1].Token, nil); r.code != 503 || errCode(t, r) != api.CodeKeystoreUnavailable {
		t.Fatalf("revoke during the outage: %d %s", r.code, r.body)
	}
	if r := secMustSend(t, plainClient, "POST", rs[1].URL+api.RouteTokens, rs[1].Token, []byte(`{"name":"x","policies":["orders"]}`)); r.code != 503 {
		t.Fatalf("issue during the outage: %d %s", r.code, r.body)
	}
	if code := encryptAs(t, rs[1].URL, live.Secret, "orders-1"); code != 200 {
		t.Fatalf("the token whose revocation failed: %d", code)
	}
	clock.Advance(live.ExpiresAt.Sub(clock.Now()) - time.Second)
	for i, r := range rs {
		if code := encryptAs(t, r.URL, live.Secret, "orders-1"); code != 200 {
			t.Fatalf("replica %d a second before the token expires: %d", i, code)
		}
	}
	clock.Advance(time.Second)
	for i, r := range rs {
		if code := encryptAs(t, r.URL, live.Secret, "orders-1"); code != 401 {
			t.Fatalf("replica %d at the token's expiry, database down: %d", i, code)
		}
	}
}

func sortDurations(d []time.Duration) { sort.Slice(d, func(i, j int) bool { return d[i] < d[j] }) }
