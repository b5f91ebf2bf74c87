//go:build linux

package haproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/client"
	"github.com/cipherd/cipherd/internal/pgtest"
	"github.com/cipherd/cipherd/internal/proctest"
)

// TestHAProxyPostgres runs three cipherd processes on one PostgreSQL
// keystore behind HAProxy, under encrypt→decrypt load through HAProxy the
// whole time: keys are created, rotated and configured through the load
// balancer; PostgreSQL is killed with SIGKILL and restarted; no data
// request fails, and every ciphertext made meanwhile opens on every
// replica.
func TestHAProxyPostgres(t *testing.T) {
	haproxy := needHAProxy(t, "starts PostgreSQL, three cipherd processes and haproxy")
	db := pgtest.Start(t)
	c := startPostgresCluster(t, haproxy, db.Database(t), replicaAEADs...)

	if _, err := c.api.CreateKey(ctx(t), testKey, api.CreateKeyRequest{}); err != nil {
		t.Fatalf("create through HAProxy: %v", err)
	}
	for _, r := range c.replicas {
		if !proctest.Poll(time.Second, func() bool { _, err := r.api.DescribeKey(ctx(t), testKey); return err == nil }) {
			t.Fatalf("%s does not know the key 1 s after its creation", r.name)
		}
	}

	// A key created through one replica encrypts and decrypts through
	// another straight after, its notification still on the way or not.
	t.Run("CreateHereUseThere", func(t *testing.T) {
		for i := range 6 {
			name := fmt.Sprintf("fresh%d", i)
			from, to := c.replicas[i%3], c.replicas[(i+1)%3]
			if _, err := from.api.CreateKey(ctx(t), name, api.CreateKeyRequest{}); err != nil {
				t.Fatalf("create through %s: %v", from.name, err)
			}
			res, err := to.api.Encrypt(ctx(t), name, []byte("fresh"), nil)
			if err != nil {
				t.Fatalf("encrypt under %s through %s straight after its creation through %s: %v", name, to.name, from.name, err)
			}
			if pt, err := c.replicas[(i+2)%3].api.Decrypt(ctx(t), name, res.Ciphertext, nil); err != nil || string(pt) != "fresh" {
				t.Fatalf("decrypt on the third replica: %q, %v", pt, err)
			}
		}
	})

	l := startLoad(c.api, 6)
	l.waitProgress(t, 50)
	t0 := time.Now()

	t.Run("Rotate", func(t *testing.T) {
		for range 5 {
			k, err := c.api.RotateKey(ctx(t), testKey)
			if err != nil {
				t.Fatalf("rotate through HAProxy: %v", err)
			}
			d := c.everySealsUnder(t, k.LatestVersion, time.Second)
			t.Logf("every replica sealed under version %d %v after the rotation", k.LatestVersion, d.Round(time.Millisecond))
		}
	})
	t.Run("Configure", func(t *testing.T) {
		if _, err := c.api.ConfigureKey(ctx(t), testKey, api.KeyConfig{DeletionAllowed: true, RotationPeriod: "720h"}); err != nil {
			t.Fatalf("configure through HAProxy: %v", err)
		}
		for _, r := range c.replicas {
			if !proctest.Poll(time.Second, func() bool {
				k, err := r.api.DescribeKey(ctx(t), testKey)
				return err == nil && k.DeletionAllowed && k.RotationPeriod == "720h0m0s"
			}) {
				t.Fatalf("%s does not show the configuration 1 s after it was set", r.name)
			}
		}
	})
	t.Run("ParallelRotations", func(t *testing.T) {
		before, err := c.api.DescribeKey(ctx(t), testKey)
		if err != nil {
			t.Fatal(err)
		}
		const n = 100
		var mu sync.Mutex
		seen := map[uint32]int{}
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				k, err := c.api.RotateKey(ctx(t), testKey)
				if err != nil {
					t.Errorf("rotate: %v", err)
					return
				}
				mu.Lock()
				seen[k.LatestVersion]++
				mu.Unlock()
			})
		}
		wg.Wait()
		for v := before.LatestVersion + 1; v <= before.LatestVersion+n; v++ {
			if seen[v] != 1 {
				t.Errorf("version %d made %d times, want once", v, seen[v])
			}
		}
		c.everySealsUnder(t, before.LatestVersion+n, time.Second)
	})
	t.Run("DatabaseKilled", func(t *testing.T) {
		db.Kill(t)
		for _, r := range c.replicas {
			if !proctest.Poll(15*time.Second, func() bool { return r.readyzKeystore(t) == "unavailable" }) {
				t.Fatalf("%s's /readyz does not report the keystore unavailable", r.name)
			}
		}
		_, err := c.api.RotateKey(ctx(t), testKey)
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Status != 503 || ce.API.Code != api.CodeKeystoreUnavailable {
			t.Fatalf("rotation during the outage = %v, want 503 %s", err, api.CodeKeystoreUnavailable)
		}
		for _, r := range c.replicas {
			if st := c.serverStatus(r); st != "UP" {
				t.Fatalf("HAProxy took %s out during the outage (%s): it still serves data", r.name, st)
			}
		}
		l.waitProgress(t, 100) // data keeps flowing with the database down
		db.Restart(t)
		var k *api.Key
		if !proctest.Poll(20*time.Second, func() bool { k, err = c.api.RotateKey(ctx(t), testKey); return err == nil }) {
			t.Fatalf("rotation after the restart: %v", err)
		}
		c.everySealsUnder(t, k.LatestVersion, 5*time.Second)
		for _, r := range c.replicas {
			if !proctest.Poll(5*time.Second, func() bool { return r.readyzKeystore(t) == "ok" }) {
				t.Fatalf("%s's /readyz still reports the keystore unavailable", r.name)
			}
		}
	})

	l.waitProgress(t, 50)
	l.finish()
	if fs := l.failuresSince(t0); len(fs) > 0 {
		t.Fatalf("failed data requests: %s", summary(fs))
	}
	if len(l.corrupt) > 0 {
		t.Fatalf("%d round trips decrypted to another plaintext", len(l.corrupt))
	}
	var apis []*client.Client
	for _, r := range c.replicas {
		apis = append(apis, r.api)
	}
	verifyAcks(t, l.acks, apis)
	t.Logf("%d round trips through HAProxy, none failed; %d ciphertexts open on every replica", l.ok.Load(), len(l.acks))

	t.Run("ReplicaKilledMidRotation", func(t *testing.T) { testKilledMidRotation(t, c) })
}

// testKilledMidRotation kills a replica with SIGKILL while it and the others
// rotate the key concurrently: every rotation acknowledged has its own
// version, the versions stay 1…n with nothing half-written, and after the
// replica's restart every replica agrees on them.
func testKilledMidRotation(t *testing.T, c *cluster) {
	victim := c.replicas[0]
	before, err := c.replicas[1].api.DescribeKey(ctx(t), testKey)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[uint32]int{}
	var wg sync.WaitGroup
	for i := range 60 {
		r := c.replicas[i%3]
		wg.Go(func() {
			k, err := r.api.RotateKey(context.Background(), testKey)
			if err != nil {
				if r != victim {
					t.Errorf("rotation on %s, which lives: %v", r.name, err)
				}
				return // the victim died with it in flight
			}
			mu.Lock()
			acked[k.LatestVersion]++
			mu.Unlock()
		})
	}
	time.Sleep(20 * time.Millisecond)
	victim.proc.kill()
	wg.Wait()
	victim.start(t, c)
	victim.waitReady(t)

	var n uint32
	for i, r := range c.replicas {
		k, err := r.api.DescribeKey(ctx(t), testKey)
		if err != nil {
			t.Fatal(err)
		}
		for j, v := range k.Versions {
			if v.Version != uint32(j+1) {
				t.Fatalf("%s: versions not 1…n: %v at %d", r.name, v.Version, j)
			}
		}
		if i == 0 {
			n = k.LatestVersion
		} else if !proctest.Poll(time.Second, func() bool {
			k, err := r.api.DescribeKey(ctx(t), testKey)
			return err == nil && k.LatestVersion == n
		}) {
			t.Fatalf("%s does not agree on version %d", r.name, n)
		}
	}
	for v, times := range acked {
		if times != 1 || v <= before.LatestVersion || v > n {
			t.Fatalf("acknowledged version %d made %d times (versions %d…%d)", v, times, before.LatestVersion+1, n)
		}
	}
	if made := int(n - before.LatestVersion); made < len(acked) || made > 60 {
		t.Fatalf("%d versions made for %d acknowledged rotations of 60", made, len(acked))
	}
	t.Logf("%d of 60 rotations acknowledged, %d versions made; the killed replica restarted with them", len(acked), n-before.LatestVersion)
	c.everySealsUnder(t, n, 5*time.Second)
}

// everySealsUnder waits until every replica, asked directly, encrypts
// under version v, failing the test after within; it returns how long it
// took.
func (c *cluster) everySealsUnder(t *testing.T, v uint32, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for _, r := range c.replicas {
		var got uint32
		ok := proctest.Poll(within-time.Since(start), func() bool {
			res, err := r.api.Encrypt(context.Background(), testKey, []byte("probe"), nil)
			if err == nil {
				got = res.KeyVersion
			}
			return got >= v
		})
		if !ok {
			t.Fatalf("%s seals under version %d %v after the rotation to %d", r.name, got, within, v)
		}
	}
	return time.Since(start)
}

// readyzKeystore returns the "keystore" field of the replica's /readyz.
func (r *replica) readyzKeystore(t *testing.T) string {
	resp, err := http.Get(r.url() + "/readyz")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var body struct {
		Keystore string `json:"keystore"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&body) != nil {
		return ""
	}
	return body.Keystore
}
