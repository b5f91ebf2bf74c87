package server

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cipherd/cipherd/api"
)

// An address that fails auth_failure_burst times is refused 429
// auth_rate_limited with Retry-After, before its credential is looked at,
// a good one too; another address is not; successes take nothing; and no
// log line holds a token.
func TestAuthFailureLimit(t *testing.T) {
	// A rate slow enough that nothing refills during the test.
	ts := startTestServer(t, Config{AuthFailureRate: 0.01, AuthFailureBurst: 5})
	url := ts.URL + "/v1/encrypt/default"
	bad := func(i int) string { return fmt.Sprintf("cdt_%016x_%s", i, strings.Repeat("A", 43)) }

	for i := range 4 {
		if r := secMustSend(t, plainClient, "POST", url, bad(i), secEncryptBody); r.code != 401 {
			t.Fatalf("bad token %d: %d, want 401", i, r.code)
		}
	}
	for range 20 { // successes take nothing from the budget
		if r := secMustSend(t, plainClient, "POST", url, ts.Token, secEncryptBody); r.code != 200 {
			t.Fatalf("the admin token between failures: %d", r.code)
		}
	}
	if r := secMustSend(t, plainClient, "POST", url, bad(4), secEncryptBody); r.code != 401 {
		t.Fatalf("the fifth bad token: %d, want 401", r.code)
	}
	fams, _ := ts.scrape(t)
	failures := fams["cipherd_auth_failures_total"].value("cipherd_auth_failures_total", nil)

	// Over the burst: refused before the token is looked at, whatever it is.
	for i, tok := range []string{bad(5), ts.Token, "", bad(6)} {
		r := secMustSend(t, plainClient, "POST", url, tok, secEncryptBody)
		if r.code != 429 || errCode(t, r) != api.CodeAuthRateLimited {
			t.Fatalf("request %d over the limit: %d %s, want 429 auth_rate_limited", i, r.code, r.body)
		}
		// 1 / 0.01 s until the next failure is allowed.
		if ra, err := strconv.Atoi(r.hdr.Get("Retry-After")); err != nil || ra < 90 || ra > 100 {
			t.Errorf("Retry-After %q, want about 100", r.hdr.Get("Retry-After"))
		}
	}
	// Unauthenticated routes are not limited.
	if r := secMustSend(t, plainClient, "GET", ts.URL+api.RouteReadyz, "", nil); r.code != 200 {
		t.Errorf("/readyz from the limited address: %d", r.code)
	}
	fams, _ = ts.scrape(t)
	if got := fams["cipherd_auth_failures_total"].value("cipherd_auth_failures_total", nil); got != failures {
		t.Errorf("cipherd_auth_failures_total went from %v to %v: refused requests were authenticated", failures, got)
	}
	if got := fams["cipherd_auth_rate_limited_total"].value("cipherd_auth_rate_limited_total", nil); got != 4 {
		t.Errorf("cipherd_auth_rate_limited_total = %v, want 4", got)
	}

	// Another address (the loopback network is all local on Linux) is
	// not limited.
	other := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext,
	}}
	r, err := secSend(other, "POST", url, ts.Token, secEncryptBody)
	switch {
	case err != nil && strings.Contains(err.Error(), "assign requested address"):
		t.Log("no 127.0.0.2 to connect from; TestAuthFailLimiter covers other addresses")
	case err != nil:
		t.Fatal(err)
	case r.code != 200:
		t.Errorf("the admin token from another address: %d %s", r.code, r.body)
	default:
		if r := secMustSend(t, other, "POST", url, bad(7), secEncryptBody); r.code != 401 {
			t.Errorf("a bad token from another address: %d, want 401", r.code)
		}
	}

	lines := ts.Logs.FilterMessage("failed authentications over the limit: refusing the address's requests").All()
	if len(lines) != 1 || lines[0].ContextMap()["remote"] != "127.0.0.1" {
		t.Errorf("log lines about the limited address: %v, want one", lines)
	}
	for _, e := range ts.Logs.All() {
		s := fmt.Sprint(e.Message, e.ContextMap())
		for i := range 8 {
			if strings.Contains(s, bad(i)) || strings.Contains(s, ts.Token) {
				t.Errorf("a log line holds a token: %s", s)
			}
		}
	}
}

// With auth_failure_rate -1 there is no limit.
func TestAuthFailureLimitOff(t *testing.T) {
	ts := startTestServer(t, Config{AuthFailureRate: -1, AuthFailureBurst: 1})
	for i := range 10 {
		if r := secMustSend(t, plainClient, "POST", ts.URL+"/v1/encrypt/default", "not-a-token", secEncryptBody); r.code != 401 {
			t.Fatalf("bad token %d without a limit: %d, want 401", i, r.code)
		}
	}
	if ts.authFails != nil {
		t.Error("a limiter with auth_failure_rate -1")
	}
}

// The limiter by itself, on its own clock: budgets per address and per
// IPv6 /64, refill, Retry-After, one log line per address per minute, and
// the bound on the addresses it holds.
func TestAuthFailLimiter(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	l := newAuthFailLimiter(1, 3, 4, zap.New(core))
	now := time.Unix(1_700_000_000, 0)
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")

	for range 3 {
		if _, ok := l.refused(a, now); ok {
			t.Fatal("refused within the burst")
		}
		l.failed(a, now)
	}
	wait, ok := l.refused(a, now)
	if !ok || wait != time.Second {
		t.Fatalf("after the burst: refused %v, wait %v; want 1s", ok, wait)
	}
	if _, ok := l.refused(b, now); ok {
		t.Fatal("another address refused")
	}
	if _, ok := l.refused(a, now.Add(time.Second)); ok {
		t.Fatal("refused after a second's refill")
	}
	l.failed(a, now.Add(time.Second))
	if _, ok := l.refused(a, now.Add(time.Second)); !ok {
		t.Fatal("not refused after the refill was spent")
	}
	for i := range 10 {
		l.refused(a, now.Add(time.Second+time.Duration(i)*time.Millisecond))
	}
	if n := logs.Len(); n != 1 {
		t.Errorf("%d log lines within a minute, want 1", n)
	}
	// A minute after the first line, still failing: a second line, with
	// what was refused since the first.
	for range 3 {
		l.failed(a, now.Add(time.Minute+time.Second))
	}
	l.refused(a, now.Add(time.Minute+time.Second))
	if lines := logs.All(); len(lines) != 2 || lines[1].ContextMap()["refused"] != int64(12) {
		t.Errorf("a minute later: %v, want a second line counting 12 refused", lines)
	}

	// IPv6 addresses count by their /64; IPv4-mapped ones as IPv4.
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"2001:db8::1", "2001:db8::ffff:1", true},
		{"2001:db8:0:1::1", "2001:db8::1", false},
		{"::ffff:192.0.2.1", "192.0.2.1", true},
		{"192.0.2.1", "192.0.2.2", false},
	} {
		ka, kb := authFailKey(net.ParseIP(c.a)), authFailKey(net.ParseIP(c.b))
		if (ka == kb) != c.same {
			t.Errorf("%s and %s: keys %v and %v, same %v", c.a, c.b, ka, kb, c.same)
		}
	}

	// A full bucket is forgotten: the periodic sweep keeps an address
	// logged within the minute, so that it is not logged again sooner.
	later := now.Add(time.Minute + 10*time.Second) // a is full again, and was logged 9 s ago
	l.failed(b, now)
	l.sweep(later)
	if _, ok := l.addrs[a]; !ok || len(l.addrs) != 1 {
		t.Errorf("after a sweep: %v, want a alone", l.addrs)
	}
	l.sweep(later.Add(time.Minute))
	if len(l.addrs) != 0 || l.n.Load() != 0 {
		t.Errorf("after a sweep a minute later: %v, want none", l.addrs)
	}
}

// The limiter holds at most its bound of addresses. When they all still
// fail, failures from new addresses are not counted, and those held stay
// limited; once some refill, new addresses take their places.
func TestAuthFailLimiterBound(t *testing.T) {
	const bound = 16
	l := newAuthFailLimiter(1, 2, bound, zap.NewNop())
	now := time.Unix(1_700_000_000, 0)
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)}) }
	for i := range bound {
		l.failed(addr(i), now)
		l.failed(addr(i), now)
	}
	for i := bound; i < 10*bound; i++ {
		if l.failed(addr(i), now.Add(time.Duration(i)*time.Millisecond)) {
			t.Fatalf("address %d counted in a full table", i)
		}
	}
	if len(l.addrs) != bound || l.n.Load() != bound {
		t.Fatalf("%d addresses held, bound %d", len(l.addrs), bound)
	}
	if _, ok := l.refused(addr(0), now.Add(time.Second/2)); !ok {
		t.Fatal("an address held was pushed out by new ones")
	}
	// Two seconds refill every bucket: the next new address sweeps them
	// out, whatever their log lines.
	if !l.failed(addr(1000), now.Add(2*time.Second)) || len(l.addrs) != 1 {
		t.Fatalf("after the refill: counted %d addresses, want the new one alone", len(l.addrs))
	}
	// Many addresses in turn, each failing once a second: never more than
	// the bound.
	for step := range 50 {
		at := now.Add(3*time.Second + time.Duration(step)*100*time.Millisecond)
		for i := range bound / 2 {
			l.failed(addr(2000+step*bound/2+i), at)
		}
		if len(l.addrs) > bound {
			t.Fatalf("step %d: %d addresses held, bound %d", step, len(l.addrs), bound)
		}
	}
}

// auth_failure_rate and auth_failure_burst: defaults, -1, validation and
// the environment.
func TestAuthFailureConfig(t *testing.T) {
	def := Config{}.Defaults()
	if def.AuthFailureRate != 10 || def.AuthFailureBurst != 50 {
		t.Errorf("defaults %v, %d; want 10, 50", def.AuthFailureRate, def.AuthFailureBurst)
	}
	for _, c := range []struct {
		rate  float64
		burst int
		ok    bool
	}{
		{-1, 0, true}, {0.5, 1, true}, {-2, 0, false}, {math.NaN(), 0, false}, {math.Inf(1), 0, false}, {10, -1, false},
	} {
		cfg := Config{AuthFailureRate: c.rate, AuthFailureBurst: c.burst}.Defaults()
		if err := cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("rate %v burst %d: %v", c.rate, c.burst, err)
		}
	}
	var cfg Config
	if err := cfg.ApplyEnv(func(k string) string {
		if k == "CIPHERD_AUTH_FAILURE_RATE" {
			return "-1"
		}
		return ""
	}); err != nil || cfg.AuthFailureRate != -1 {
		t.Errorf("CIPHERD_AUTH_FAILURE_RATE=-1: %v, %v", cfg.AuthFailureRate, err)
	}
	if err := cfg.ApplyEnv(func(k string) string {
		if k == "CIPHERD_AUTH_FAILURE_RATE" {
			return "fast"
		}
		return ""
	}); err == nil {
		t.Error("CIPHERD_AUTH_FAILURE_RATE=fast accepted")
	}
}
