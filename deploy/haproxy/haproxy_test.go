//go:build linux

// Package haproxy holds the example HAProxy configuration for running cipherd
// replicas behind a load balancer (haproxy.cfg) and the end-to-end test that
// runs it: three real cipherd processes sharing one keyring file, each sealing
// with a different AEAD, behind the host's real haproxy.
package haproxy

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cipherd/cipherd/client"
	"github.com/cipherd/cipherd/internal/proctest"
)

// The AEADs the three replicas are pinned to: a cluster of mixed hosts.
var replicaAEADs = []string{"aes-256-gcm", "chacha20-poly1305", "aes-128-gcm"}

func TestHAProxy(t *testing.T) {
	haproxy := needHAProxy(t, "starts three cipherd processes and haproxy")
	c := startCluster(t, haproxy, replicaAEADs...)

	var v1 []sealed
	t.Run("AnyReplicaOpensAny", func(t *testing.T) { v1 = testAnyReplicaOpensAny(t, c) })
	t.Run("KillOneReplica", func(t *testing.T) { testKillOneReplica(t, c) })
	t.Run("RollingRestart", func(t *testing.T) { testRollingRestart(t, c) })
	t.Run("KeyringRotation", func(t *testing.T) { testKeyringRotation(t, c, v1) })
	t.Run("ExactLength", func(t *testing.T) { testExactLength(t, c) })
	t.Run("ClientAddress", func(t *testing.T) { testClientAddress(t, c) })
}

// The replicas' audit records name the client that reached HAProxy, not
// HAProxy: it tells them over the PROXY protocol (send-proxy-v2).
func testClientAddress(t *testing.T, c *cluster) {
	const from = "127.0.0.2" // HAProxy connects to the replicas from 127.0.0.1
	count := func() (n int) {
		for _, r := range c.replicas {
			b, err := os.ReadFile(filepath.Join(r.dataDir, "audit.log"))
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
				if len(line) == 0 {
					continue // no record yet
				}
				var rec struct {
					RemoteIP string `json:"remote_ip"`
				}
				if err := json.Unmarshal(line, &rec); err != nil {
					t.Fatalf("%s's audit.log: %v: %q", r.name, err, line)
				}
				if rec.RemoteIP == from {
					n++
				}
			}
		}
		return n
	}
	before := count()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 10 * time.Second}
	const n = 4 // round robin: more than one replica
	for i := range n {
		req, _ := http.NewRequest("POST", "http://"+c.lbAddr+"/v1/encrypt/"+testKey, strings.NewReader(`{"plaintext":"aGVsbG8="}`))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("encrypt %d from %s through HAProxy: %s", i, from, resp.Status)
		}
	}
	if got := count() - before; got != n {
		t.Errorf("%d audit records name %s after %d requests from it through HAProxy", got, from, n)
	}
}

// sealed is a JSON ciphertext with what it should open to.
type sealed struct {
	pt, aad, ct []byte
	aead        string
}

func random(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// openEverywhere opens s through every replica directly and through HAProxy.
func openEverywhere(t *testing.T, c *cluster, s sealed) {
	t.Helper()
	for _, r := range c.replicas {
		got, err := r.api.Decrypt(ctx(t), testKey, s.ct, s.aad)
		if err != nil || !bytes.Equal(got, s.pt) {
			t.Fatalf("%s cannot open a %s ciphertext: %v", r.name, s.aead, err)
		}
	}
	got, err := c.api.Decrypt(ctx(t), testKey, s.ct, s.aad)
	if err != nil || !bytes.Equal(got, s.pt) {
		t.Fatalf("HAProxy: cannot open a %s ciphertext: %v", s.aead, err)
	}
}

// (a) Whatever replica sealed, any replica opens, whichever AEAD each uses:
// JSON and streams, replica to replica and through HAProxy.
func testAnyReplicaOpensAny(t *testing.T, c *cluster) []sealed {
	var all []sealed
	for _, r := range c.replicas {
		s := sealed{pt: random(100), aad: []byte("direct " + r.name)}
		res, err := r.api.Encrypt(ctx(t), testKey, s.pt, s.aad)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if res.AEAD != r.aead || res.KeyVersion != 1 {
			t.Fatalf("%s sealed with %s v%d, want %s v1", r.name, res.AEAD, res.KeyVersion, r.aead)
		}
		s.ct, s.aead = res.Ciphertext, res.AEAD
		openEverywhere(t, c, s)
		all = append(all, s)
	}

	// Round robin through HAProxy reaches every replica, so every AEAD.
	seen := map[string]bool{}
	for i := 0; i < 2*len(c.replicas); i++ {
		s := sealed{pt: random(1 + i*300), aad: []byte("via haproxy")}
		res, err := c.api.Encrypt(ctx(t), testKey, s.pt, s.aad)
		if err != nil {
			t.Fatal(err)
		}
		s.ct, s.aead = res.Ciphertext, res.AEAD
		seen[res.AEAD] = true
		openEverywhere(t, c, s)
		all = append(all, s)
	}
	if len(seen) != len(replicaAEADs) {
		t.Fatalf("through HAProxy the AEADs were %v, want all of %v", seen, replicaAEADs)
	}

	// Streams of several chunks, sealed by each replica and through HAProxy,
	// opened by every other path; the success trailer crosses HAProxy.
	sealers := append(slices.Clone(c.replicas), nil) // nil: through HAProxy
	for _, from := range sealers {
		api, name := c.api, "HAProxy"
		if from != nil {
			api, name = from.api, from.name
		}
		pt, aad := random(150<<10+7), []byte("stream from "+name)
		var ct bytes.Buffer
		info, err := api.EncryptStream(ctx(t), testKey, &ct, bytes.NewReader(pt), aad)
		if err != nil {
			t.Fatalf("stream sealed through %s: %v", name, err)
		}
		if from != nil && info.AEAD != from.aead {
			t.Fatalf("%s sealed a stream with %s, want %s", name, info.AEAD, from.aead)
		}
		openers := append(slices.Clone(c.replicas), nil)
		for _, to := range openers {
			api, toName := c.api, "HAProxy"
			if to != nil {
				api, toName = to.api, to.name
			}
			var out bytes.Buffer
			if _, err := api.DecryptStream(ctx(t), testKey, &out, bytes.NewReader(ct.Bytes()), aad); err != nil || !bytes.Equal(out.Bytes(), pt) {
				t.Fatalf("a %s stream sealed through %s does not open through %s: %v", info.AEAD, name, toName, err)
			}
		}
	}
	return all
}

// (b) kill -9 of one replica under load, with a stream surely in flight on
// it: nothing the client was told succeeded is lost (the cut stream reads as
// failed), failures are only those the client saw, and once HAProxy marks the
// replica DOWN every request succeeds.
func testKillOneReplica(t *testing.T, c *cluster) {
	victim := c.replicas[1]
	survivors := []*client.Client{c.replicas[0].api, c.replicas[2].api}
	retries0 := c.counter(t, "cipherd/BACKEND", "wretr")

	served := c.counter(t, "cipherd/"+victim.name, "hrsp_2xx")
	l := startLoad(c.api, 8)
	l.waitProgress(t, 200)
	if c.counter(t, "cipherd/"+victim.name, "hrsp_2xx") == served {
		t.Fatalf("%s had no share of the load", victim.name)
	}
	// Streams in flight at the moment of the kill, one of them surely on
	// the victim: round robin reaches it within a few.
	hc := &http.Client{Transport: newTransport()}
	var streams []*slowStream
	var onVictim *slowStream
	for i := 0; onVictim == nil; i++ {
		if i == 30 {
			t.Fatalf("30 streams through HAProxy and none on %s", victim.name)
		}
		s := startSlowStream(t, c, hc, i)
		streams = append(streams, s)
		if s.aead == victim.aead {
			onVictim = s
		}
	}

	killed := time.Now()
	if err := syscall.Kill(-victim.proc.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	victim.proc.waitExit(t, 10*time.Second)
	c.waitStatus(t, victim, "DOWN")
	down := time.Now()
	l.waitProgress(t, 300)
	l.finish()

	for _, s := range streams {
		a, err := s.finish()
		switch {
		case s == onVictim && err == nil:
			t.Errorf("the stream in flight on %s when it was killed reads as complete", victim.name)
		case s == onVictim:
			l.failures = append(l.failures, failure{killed, "encrypt (slow stream on the killed replica)", err})
		case err != nil:
			t.Errorf("a stream in flight on a surviving replica (%s) failed: %v", s.aead, err)
		default:
			l.acks = append(l.acks, a)
		}
	}

	if len(l.corrupt) > 0 {
		t.Fatalf("%d round trips decrypted to another plaintext: %v", len(l.corrupt), l.corrupt[:1])
	}
	after := l.failuresSince(down)
	t.Logf("kill -9 %s: %d round trips, %d acknowledged ciphertexts; client-visible failures: %s; after DOWN (%v after the kill): %s; HAProxy retries: %d",
		victim.name, l.ok.Load(), len(l.acks), summary(l.failures), down.Sub(killed).Round(time.Millisecond), summary(after),
		c.counter(t, "cipherd/BACKEND", "wretr")-retries0)
	if len(after) > 0 {
		t.Errorf("requests started after HAProxy marked %s DOWN failed: %s", victim.name, summary(after))
	}
	verifyAcks(t, l.acks, survivors)

	victim.start(t, c)
	victim.waitReady(t)
	c.waitStatus(t, victim, "UP")
}

// (c) Rolling restart under load: each replica in turn gets SIGTERM, leaves
// HAProxy's rotation while it drains, exits 0, starts again and comes back
// UP. No request fails, and HAProxy never has to retry one.
func testRollingRestart(t *testing.T, c *cluster) {
	retries0 := c.counter(t, "cipherd/BACKEND", "wretr")
	l := startLoad(c.api, 8)
	l.waitProgress(t, 100)
	for _, r := range c.replicas {
		sent := time.Now()
		if err := r.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		c.waitStatus(t, r, "DOWN")
		if !r.proc.running() {
			t.Fatalf("%s exited before HAProxy took it out: drain_delay %v is too short for the checks", r.name, drainDelay)
		}
		t.Logf("%s: DOWN in HAProxy %v after SIGTERM, while draining", r.name, time.Since(sent).Round(time.Millisecond))
		if err := r.proc.waitExit(t, 30*time.Second); err != nil {
			t.Fatalf("%s: exit after SIGTERM: %v", r.name, err)
		}
		r.start(t, c)
		r.waitReady(t)
		c.waitStatus(t, r, "UP")
		served := c.counter(t, "cipherd/"+r.name, "hrsp_2xx")
		if !proctest.Poll(10*time.Second, func() bool { return c.counter(t, "cipherd/"+r.name, "hrsp_2xx") > served }) {
			t.Fatalf("HAProxy sends nothing to %s after it came back", r.name)
		}
		l.waitProgress(t, 100)
	}
	l.finish()

	retries := c.counter(t, "cipherd/BACKEND", "wretr") - retries0
	t.Logf("rolling restart: %d round trips, %d acknowledged ciphertexts, failures: %s, HAProxy retries: %d",
		l.ok.Load(), len(l.acks), summary(l.failures), retries)
	if len(l.failures) > 0 || len(l.corrupt) > 0 {
		t.Errorf("rolling restart: %d failed requests (%s), %d corrupt", len(l.failures), summary(l.failures), len(l.corrupt))
	}
	if retries != 0 {
		t.Errorf("HAProxy retried %d requests: a replica closed connections it was still routing to", retries)
	}
	apis := []*client.Client{}
	for _, r := range c.replicas {
		apis = append(apis, r.api)
	}
	verifyAcks(t, l.acks, apis)
}

// (d) A version added to the shared keyring with `cipherd keyring rotate`
// reaches every replica; ciphertexts under the old version still open.
func testKeyringRotation(t *testing.T, c *cluster, v1 []sealed) {
	if out, err := exec.Command(c.bin, "keyring", "rotate", "-f", c.keyring, testKey).CombinedOutput(); err != nil {
		t.Fatalf("cipherd keyring rotate: %v\n%s", err, out)
	}
	rotated := time.Now()
	for _, r := range c.replicas {
		var version uint32
		probe := ctx(t)
		ok := proctest.Poll(15*time.Second, func() bool {
			res, err := r.api.Encrypt(probe, testKey, []byte("probe"), nil)
			if err != nil {
				t.Fatalf("%s: %v", r.name, err)
			}
			version = res.KeyVersion
			return version == 2
		})
		if !ok {
			t.Fatalf("%s still seals under version %d", r.name, version)
		}
	}
	t.Logf("every replica seals under version 2 %v after the rotation", time.Since(rotated).Round(time.Millisecond))

	for _, r := range c.replicas {
		s := sealed{pt: random(64), aad: []byte("v2 " + r.name)}
		res, err := r.api.Encrypt(ctx(t), testKey, s.pt, s.aad)
		if err != nil || res.KeyVersion != 2 {
			t.Fatalf("%s: %v", r.name, err)
		}
		s.ct, s.aead = res.Ciphertext, res.AEAD
		openEverywhere(t, c, s)
	}
	if len(v1) == 0 {
		t.Fatal("no version-1 ciphertexts to check")
	}
	for _, s := range v1 {
		openEverywhere(t, c, s)
	}
}
