package server

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc/pgstore"
	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/pgtest"
)

// TestScheduledDeletionPostgresReplicas runs three servers on one
// PostgreSQL keystore, as three replicas of a fleet: a deletion scheduled
// on one is refused by all, a cancel on another restores the key on all,
// and a deletion that comes due is done by exactly one of them, which
// records it, after its delete_at and not before.
func TestScheduledDeletionPostgresReplicas(t *testing.T) {
	dsn := pgtest.Shared(t).Database(t)
	root := keystoretest.Secret(t)
	var rs []*testServer
	for range 3 {
		st, err := pgstore.Open(context.Background(), pgstore.Config{DSN: dsn, RootKey: &root, ReconnectMax: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() }) // after the server's Shutdown
		// Due deletions are looked for every min_rotation_period here,
		// so that one is done within a fraction of a second.
		rs = append(rs, startTestServer(t, Config{Keystore: st, SkipBenchmark: true,
			KeyDeletionMinWait: time.Second, MinRotationPeriod: 100 * time.Millisecond}))
	}
	var enc api.EncryptResult
	if code := rs[0].postJSON(t, "/v1/keys/fleet", api.CreateKeyRequest{KeyConfig: api.KeyConfig{DeletionAllowed: true}}, nil); code != 201 {
		t.Fatalf("create: %d", code)
	}
	if code := rs[0].postJSON(t, "/v1/encrypt/fleet", api.EncryptItem{Plaintext: []byte("kept")}, &enc); code != 200 {
		t.Fatalf("encrypt: %d", code)
	}
	body, _ := json.Marshal(api.DecryptItem{Ciphertext: enc.Ciphertext})
	decrypt := func(r *testServer) (int, api.Code) {
		code, b, _ := r.do(t, "POST", "/v1/decrypt/fleet", api.ContentTypeJSON, bytes.NewReader(body), "")
		return code, codeOf(b)
	}
	// everyReplica polls each replica until ok says it has seen the
	// change, for at most limit.
	everyReplica := func(what string, limit time.Duration, ok func(r *testServer) bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for i, r := range rs {
			for !ok(r) {
				if time.Now().After(deadline) {
					t.Fatalf("replica %d: not %s after %v", i, what, limit)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	pendingGauge := func(r *testServer) float64 {
		fams, _ := r.scrape(t)
		return fams["cipherd_keys_pending_deletion"].value("cipherd_keys_pending_deletion", nil)
	}

	// Scheduled on replica 1: refused everywhere, and counted.
	code, b, _ := rs[1].do(t, "DELETE", "/v1/keys/fleet?wait=1h", "", nil, "")
	if code != 200 {
		t.Fatalf("schedule: %d %s", code, b)
	}
	everyReplica("refusing the key pending deletion", 5*time.Second, func(r *testServer) bool {
		code, c := decrypt(r)
		return code == 409 && c == api.CodeKeyPendingDeletion
	})
	everyReplica("counting it", 5*time.Second, func(r *testServer) bool { return pendingGauge(r) == 1 })

	// Cancelled on replica 2: restored everywhere.
	if code, b, _ := rs[2].do(t, "POST", "/v1/keys/fleet/cancel-deletion", "", nil, ""); code != 200 {
		t.Fatalf("cancel: %d %s", code, b)
	}
	everyReplica("serving the key again", 5*time.Second, func(r *testServer) bool {
		code, _ := decrypt(r)
		return code == 200
	})

	// Scheduled a second away on replica 0: deleted by one replica.
	code, b, _ = rs[0].do(t, "DELETE", "/v1/keys/fleet?wait=1s", "", nil, "")
	var k api.Key
	if code != 200 || json.Unmarshal(b, &k) != nil || k.Deletion == nil {
		t.Fatalf("schedule: %d %s", code, b)
	}
	everyReplica("rid of the key", 5*time.Second, func(r *testServer) bool {
		code, _, _ := r.do(t, "GET", "/v1/keys/fleet", "", nil, "")
		return code == 404
	})
	everyReplica("counting no key pending", 5*time.Second, func(r *testServer) bool { return pendingGauge(r) == 0 })
	var deletions []map[string]any
	for _, r := range rs {
		for _, rec := range auditRecords(t, filepath.Join(r.cfg.DataDir, "audit.log")) {
			if rec["action"] == "delete-due" {
				deletions = append(deletions, rec)
			}
		}
	}
	if len(deletions) != 1 {
		t.Fatalf("%d records of the scheduled deletion across the replicas, want 1: %v", len(deletions), deletions)
	}
	rec := deletions[0]
	at, err := time.Parse(time.RFC3339Nano, rec["time"].(string))
	if err != nil || rec["identity"] != "cipherd" || rec["key"] != "fleet" || rec["outcome"] != "ok" || rec["op"] != "keys-admin" || at.Before(k.Deletion.DeleteAt) {
		t.Fatalf("the deletion's record %v, want one by cipherd at %v or later", rec, k.Deletion.DeleteAt)
	}
	t.Logf("deleted %v after its delete_at", at.Sub(k.Deletion.DeleteAt))
}
