package server

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/cryptosvc/pgstore"
	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/pgtest"
	"github.com/cipherd/cipherd/server/speedview"
)

func getFleet(t *testing.T, ts *testServer) *speedview.FleetView {
	t.Helper()
	code, b, h := ts.do(t, "GET", "/speed/fleet", "", nil, "-")
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /speed/fleet: %d %s %s", code, h.Get("Content-Type"), b)
	}
	var v speedview.FleetView
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

// On a keystore only this process uses, the fleet is this replica, in
// every format, without credentials.
func TestSpeedFleetAlone(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	v := getFleet(t, ts)
	if v.Shared || v.Mixed || len(v.Hosts) != 1 {
		t.Fatalf("shared %v, mixed %v, %d hosts; want one, not shared", v.Shared, v.Mixed, len(v.Hosts))
	}
	h := v.Hosts[0]
	if !h.Self || !regexp.MustCompile(`^[0-9a-f]{12}$`).MatchString(h.Replica) || h.Replica != ts.replica {
		t.Errorf("the row: self %v, replica %q (this one %q)", h.Self, h.Replica, ts.replica)
	}
	if h.AEAD != ts.sel.AEADName || h.Implementations[h.AEAD] != ts.sel.Implementation(ts.sel.AEAD).Name() || h.GOMAXPROCS < 1 || h.CPU != ts.speed.host.Brand {
		t.Errorf("the row does not describe this host: %+v", h)
	}
	if !strings.Contains(v.Note, "not shared") || v.UnpinnedKeys < 1 {
		t.Errorf("note %q, unpinned keys %d", v.Note, v.UnpinnedKeys)
	}

	code, b, _ := ts.do(t, "GET", "/speed/fleet?format=text", "", nil, "-")
	if code != 200 || !strings.HasPrefix(string(b), "The 'numbers' are in 1000s of bytes per second processed.\n") || !strings.Contains(string(b), "/"+h.Replica) {
		t.Errorf("text: %d\n%s", code, b)
	}
	code, b, _ = ts.do(t, "GET", "/speed/fleet?format=mr", "", nil, "-")
	if code != 200 || !strings.HasPrefix(string(b), "+H:1024:16384\n") {
		t.Errorf("mr: %d\n%s", code, b)
	}
	code, b, hdr := ts.do(t, "GET", "/speed/fleet?format=html", "", nil, "-")
	if code != 200 || hdr.Get("Content-Security-Policy") != speedview.PageCSP || !strings.Contains(string(b), "<table>") || !strings.Contains(string(b), h.Replica) {
		t.Errorf("html: %d, CSP %q", code, hdr.Get("Content-Security-Policy"))
	}
	if code, _, _ := ts.do(t, "GET", "/speed/fleet?format=xml", "", nil, "-"); code != 400 {
		t.Errorf("format=xml: %d, want 400", code)
	}
}

// Replicas on one PostgreSQL keystore show each other, from whichever
// replica is asked; a report older than three intervals is left out, and
// a replica whose selection differs from the others' is flagged.
func TestSpeedFleetPostgres(t *testing.T) {
	dsn := pgtest.Shared(t).Database(t)
	root := keystoretest.Secret(t)
	ctx := context.Background()
	var rs []*testServer
	var store *pgstore.Store
	for range 2 {
		st, err := pgstore.Open(ctx, pgstore.Config{DSN: dsn, RootKey: &root, ReconnectMax: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		store = st
		rs = append(rs, startTestServer(t, Config{Keystore: st, SkipBenchmark: true, FleetInterval: time.Second}))
	}
	// Each publishes at start: both see both, the same.
	want := map[string]bool{rs[0].replica: true, rs[1].replica: true}
	for i, r := range rs {
		var v *speedview.FleetView
		deadline := time.Now().Add(10 * time.Second)
		for v = getFleet(t, r); len(v.Hosts) != 2 && time.Now().Before(deadline); v = getFleet(t, r) {
			time.Sleep(20 * time.Millisecond)
		}
		if !v.Shared || v.Mixed || len(v.Hosts) != 2 || !want[v.Hosts[0].Replica] || !want[v.Hosts[1].Replica] {
			t.Fatalf("replica %d's view: shared %v, mixed %v, hosts %+v", i, v.Shared, v.Mixed, v.Hosts)
		}
		for _, h := range v.Hosts {
			if h.Self != (h.Replica == r.replica) || h.Differs {
				t.Errorf("replica %d's view of %s: self %v, differs %v", i, h.Replica, h.Self, h.Differs)
			}
		}
	}

	// A replica on another kind of host, and one that stopped reporting.
	other := rs[0].speed.fleetReport()
	other.Replica, other.Hostname, other.AEAD = "0123456789ab", "elsewhere", "chacha20-poly1305"
	b, _ := json.Marshal(other)
	for _, id := range []string{"0123456789ab", "gone00000000"} {
		if err := store.PublishHost(ctx, id, b); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE cipherd_hosts SET reported = now() - interval '10 seconds' WHERE replica = 'gone00000000'`); err != nil {
		t.Fatal(err)
	}
	// The view reads the keystore at most every fleetReadEvery.
	v := getFleet(t, rs[1])
	for deadline := time.Now().Add(5 * fleetReadEvery); len(v.Hosts) != 3 && time.Now().Before(deadline); v = getFleet(t, rs[1]) {
		time.Sleep(50 * time.Millisecond)
	}
	if len(v.Hosts) != 3 || !v.Mixed {
		t.Fatalf("with a chacha20 replica and a stale one: %d hosts, mixed %v; want 3, mixed", len(v.Hosts), v.Mixed)
	}
	for _, h := range v.Hosts {
		if h.Differs != (h.Replica == "0123456789ab") {
			t.Errorf("%s: differs %v", h.Replica, h.Differs)
		}
	}
	if !strings.Contains(v.Note, "elsewhere/0123456789ab would seal with chacha20-poly1305") || !strings.Contains(v.Note, "pin one") {
		t.Errorf("note: %q", v.Note)
	}
	// rs[1] read the keystore last: its view has the three.
	code, text, _ := rs[1].do(t, "GET", "/speed/fleet?format=text", "", nil, "-")
	if code != 200 || !strings.Contains(string(text), "elsewhere/0123456789ab *") {
		t.Errorf("text: %d\n%s", code, text)
	}
}

// Requests for the fleet view within fleetReadEvery share one read of the
// keystore; a failed read is not kept.
func TestFleetReadsShared(t *testing.T) {
	var f fleetReads
	reads := 0
	read := func(context.Context) ([]cryptosvc.PublishedHost, error) {
		reads++
		return []cryptosvc.PublishedHost{{Replica: "r"}}, nil
	}
	for range 5 {
		if h, err := f.get(context.Background(), read); err != nil || len(h) != 1 {
			t.Fatalf("%v, %v", h, err)
		}
	}
	if reads != 1 {
		t.Fatalf("%d reads for 5 requests at once, want 1", reads)
	}
	f.at = time.Now().Add(-fleetReadEvery) // the read has aged
	fail := func(context.Context) ([]cryptosvc.PublishedHost, error) {
		reads++
		return nil, cryptosvc.ErrUnavailable
	}
	if _, err := f.get(context.Background(), fail); err == nil {
		t.Fatal("a failed read answered")
	}
	if _, err := f.get(context.Background(), read); err != nil || reads != 3 {
		t.Fatalf("after a failed read: %v, %d reads; want a new read", err, reads)
	}
}
