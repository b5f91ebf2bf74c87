//go:build linux

package haproxy

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/cipherd/cipherd/internal/pgtest"
	"github.com/cipherd/cipherd/internal/proctest"
)

// fleetView is what the test reads of GET /speed/fleet.
type fleetView struct {
	Shared bool `json:"shared"`
	Mixed  bool `json:"mixed"`
	Hosts  []struct {
		Replica  string   `json:"replica"`
		AEAD     string   `json:"aead"`
		Disabled []string `json:"disabled"`
		Differs  bool     `json:"differs"`
		Self     bool     `json:"self"`
	} `json:"hosts"`
	Note string `json:"note"`
}

// TestHAProxyFleet runs three replicas on one PostgreSQL keystore behind
// HAProxy, one of them with AES-NI switched off (GODEBUG=cpu.aes=off), so
// that it selects differently: /speed/fleet through HAProxy, whichever
// replica answers, shows all three with that one flagged; once it is
// killed, it drops out of the view after three report intervals.
func TestHAProxyFleet(t *testing.T) {
	haproxy := needHAProxy(t, "starts PostgreSQL, three cipherd processes and haproxy")
	db := pgtest.Start(t)
	every := []string{"CIPHERD_FLEET_INTERVAL=1s"}
	c := startPostgresClusterEnv(t, haproxy, db.Database(t), map[int][]string{
		0: every, 1: every, 2: append([]string{"GODEBUG=cpu.aes=off"}, every...),
	}, "", "", "")
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	getFrom := func(addr string) (*fleetView, error) {
		resp, err := hc.Get("http://" + addr + "/speed/fleet")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			return nil, err
		}
		var v fleetView
		return &v, json.Unmarshal(b, &v)
	}
	get := func() (*fleetView, error) { return getFrom(c.lbAddr) }
	odd := func(v *fleetView) int {
		n := 0
		for _, h := range v.Hosts {
			if h.Differs {
				n++
				if !slices.Contains(h.Disabled, "AES-NI") {
					t.Errorf("flagged %s, which has AES-NI (disabled %v)", h.Replica, h.Disabled)
				}
			}
		}
		return n
	}

	// Every replica has seen the three reports (each reads the keystore
	// at most once a second) before the answers through HAProxy count.
	var v *fleetView
	var err error
	for _, r := range c.replicas {
		if !proctest.Poll(20*time.Second, func() bool { v, err = getFrom(r.addr); return err == nil && v != nil && len(v.Hosts) == 3 }) {
			t.Fatalf("%s never showed three replicas: %+v, %v", r.name, v, err)
		}
	}
	selves := map[string]bool{}
	for range 6 { // round robin: every replica answers
		v, err := get()
		if err != nil || v == nil {
			t.Fatalf("GET /speed/fleet through HAProxy: %v", err)
		}
		if !v.Shared || !v.Mixed || len(v.Hosts) != 3 || odd(v) != 1 {
			t.Fatalf("through HAProxy: shared %v, mixed %v, %d hosts, %d flagged; want a mixed fleet of 3, 1 flagged\n%s", v.Shared, v.Mixed, len(v.Hosts), odd(v), v.Note)
		}
		for _, h := range v.Hosts {
			if h.Self {
				selves[h.Replica] = true
			}
		}
	}
	if len(selves) != 3 {
		t.Errorf("answered by %d replicas of 3", len(selves))
	}

	c.replicas[2].proc.kill()
	if !proctest.Poll(30*time.Second, func() bool { v, err = get(); return err == nil && v != nil && len(v.Hosts) == 2 }) {
		t.Fatalf("the killed replica did not drop out of the view: %+v, %v", v, err)
	}
	if v.Mixed || odd(v) != 0 {
		t.Errorf("after the odd replica went: mixed %v, note %q", v.Mixed, v.Note)
	}
}
