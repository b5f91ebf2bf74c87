package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/client"
	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/cryptosvc/pgstore"
	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/pgtest"
)

// usageWorkload runs a known number of operations of each kind on key
// through the API with the Go client, and returns the counts they leave
// on the key's version 1: JSON one at a time and in batches, data keys,
// streams, and local sealing and opening. Failures count nothing.
func usageWorkload(t *testing.T, url, token, key string) api.KeyVersionUsage {
	t.Helper()
	cl, err := client.New(url, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	aad := []byte("usage")
	var cts [][]byte
	for i := range 3 {
		r, err := cl.Encrypt(ctx, key, fmt.Appendf(nil, "message %d", i), aad)
		if err != nil {
			t.Fatal(err)
		}
		cts = append(cts, r.Ciphertext)
	}
	for _, ct := range cts[:2] {
		if _, err := cl.Decrypt(ctx, key, ct, aad); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.Decrypt(ctx, key, cts[2], []byte("wrong")); err == nil {
		t.Fatal("a decrypt with the wrong context succeeded")
	}
	items := make([]api.EncryptItem, 4)
	for i := range items {
		items[i] = api.EncryptItem{Plaintext: []byte("item"), Context: aad}
	}
	enc, err := cl.EncryptBatch(ctx, key, items)
	if err != nil {
		t.Fatal(err)
	}
	var dec []api.DecryptItem
	for _, r := range enc {
		if r.Error != nil {
			t.Fatalf("batch item: %+v", r.Error)
		}
		dec = append(dec, api.DecryptItem{Ciphertext: r.Ciphertext, Context: aad})
	}
	dec = append(dec, api.DecryptItem{Ciphertext: cts[2], Context: []byte("wrong")})
	res, err := cl.DecryptBatch(ctx, key, dec)
	if err != nil || len(res) != 5 || res[4].Error == nil {
		t.Fatalf("decrypt batch: %v, %+v", err, res)
	}
	if _, err := cl.DataKey(ctx, key, api.DataKeyRequest{Context: aad}); err != nil {
		t.Fatal(err)
	}
	var streams [][]byte
	for range 2 {
		var dst bytes.Buffer
		if _, err := cl.EncryptStream(ctx, key, &dst, bytes.NewReader(bytes.Repeat([]byte("s"), 40000)), aad); err != nil {
			t.Fatal(err)
		}
		streams = append(streams, dst.Bytes())
	}
	var dst bytes.Buffer
	if _, err := cl.DecryptStream(ctx, key, &dst, bytes.NewReader(streams[0]), aad); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		sealer, err := cl.NewLocalSealer(key, client.LocalLimits{})
		if err != nil {
			t.Fatal(err)
		}
		local, err := sealer.Seal(ctx, []byte("sealed locally"), aad)
		if err != nil {
			t.Fatal(err)
		}
		cts = append(cts, local)
	}
	if _, err := cl.OpenLocal(ctx, key, cts[len(cts)-1], aad); err != nil {
		t.Fatal(err)
	}
	return api.KeyVersionUsage{
		Version: 1,
		Sealed:  3 + 4 + 1 + 2, // JSON, batch items, data key, streams
		Opened:  2 + 4 + 1 + 1, // JSON, batch items, stream, message key
		// Two sealing keys; what they sealed is not seen.
		LocalSealKeys: 2,
	}
}

// describeUsage returns GET /v1/keys/{key}'s usage, failing unless 200.
func describeUsage(t *testing.T, url, token, key string) []api.KeyVersionUsage {
	t.Helper()
	r := secMustSend(t, plainClient, "GET", url+"/v1/keys/"+key, token, nil)
	if r.code != http.StatusOK {
		t.Fatalf("describe %s: %d %s", key, r.code, r.body)
	}
	var k api.Key
	if err := json.Unmarshal(r.body, &k); err != nil {
		t.Fatal(err)
	}
	return k.Usage
}

// sameCounts reports whether got is want, last_used aside, which must be
// set exactly when the version was used.
func sameCounts(got []api.KeyVersionUsage, want ...api.KeyVersionUsage) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		used := w.Sealed+w.Opened+w.LocalSealKeys > 0
		if g.Version != w.Version || g.Sealed != w.Sealed || g.Opened != w.Opened || g.LocalSealKeys != w.LocalSealKeys || (g.LastUsed != nil) != used {
			return false
		}
	}
	return true
}

// TestKeyUsageFileStore: a known number of operations of each kind shows
// exact counts on the replica that served them at once, and again after a
// restart: the counts not flushed yet reach the file keystore at shutdown.
func TestKeyUsageFileStore(t *testing.T) {
	dir := t.TempDir()
	start := func() (*testServer, *cryptosvc.FileStore) {
		store := openTestStore(t, dir, nil)
		// No periodic flush during the test: only the shutdown's.
		ts := startTestServer(t, Config{DataDir: dir, Keystore: store, SkipBenchmark: true, UsageFlushInterval: time.Hour})
		return ts, store
	}
	ts, store := start()
	if got := describeUsage(t, ts.URL, ts.Token, "default"); !sameCounts(got, api.KeyVersionUsage{Version: 1}) {
		t.Fatalf("usage of a new key: %+v", got)
	}
	want := usageWorkload(t, ts.URL, ts.Token, "default")
	before := time.Now()
	got := describeUsage(t, ts.URL, ts.Token, "default")
	if !sameCounts(got, want) {
		t.Fatalf("usage on the serving replica: %+v, want %+v", got, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	store.Close()

	ts, store = start()
	defer store.Close()
	after := describeUsage(t, ts.URL, ts.Token, "default")
	if !sameCounts(after, want) {
		t.Fatalf("usage after a restart: %+v, want %+v", after, want)
	}
	if lu := *after[0].LastUsed; lu.Before(before.Add(-time.Second)) || lu.After(time.Now()) {
		t.Errorf("last_used %v, not between the workload and now", lu)
	}
	if r := secMustSend(t, plainClient, "GET", ts.URL+"/v1/keys", ts.Token, nil); r.code != 200 || bytes.Contains(r.body, []byte(`"usage"`)) {
		t.Errorf("the key list carries usage: %d %s", r.code, r.body)
	}
}

// TestKeyUsagePostgresReplicas runs three replicas on one PostgreSQL
// keystore: each serves its own share of the operations, and every
// replica shows the fleet's sums within the flush interval.
func TestKeyUsagePostgresReplicas(t *testing.T) {
	db := pgtest.Start(t)
	dsn := db.Database(t)
	root := keystoretest.Secret(t)
	const flush = 200 * time.Millisecond
	var rs []*testServer
	for range 3 {
		st, err := pgstore.Open(context.Background(), pgstore.Config{DSN: dsn, RootKey: &root, ReconnectMax: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() }) // after the server's Shutdown
		rs = append(rs, startTestServer(t, Config{Keystore: st, SkipBenchmark: true, UsageFlushInterval: flush}))
	}
	var want api.KeyVersionUsage
	for _, r := range rs {
		w := usageWorkload(t, r.URL, r.Token, "default")
		want.Version = w.Version
		want.Sealed += w.Sealed
		want.Opened += w.Opened
		want.LocalSealKeys += w.LocalSealKeys
	}
	done := time.Now()
	for i, r := range rs {
		var got []api.KeyVersionUsage
		for {
			if got = describeUsage(t, r.URL, r.Token, "default"); sameCounts(got, want) {
				break
			}
			if time.Since(done) > 10*flush+5*time.Second {
				t.Fatalf("replica %d shows %+v, want %+v, %v after the last operation", i, got, want, time.Since(done))
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("replica %d shows the fleet's counts %v after the last operation", i, time.Since(done))
	}
}
