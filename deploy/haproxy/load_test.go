//go:build linux

package haproxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/client"
	"github.com/cipherd/cipherd/internal/proctest"
)

// load runs workers doing encrypt→decrypt round trips through one client
// (HAProxy) until stopped. Every ciphertext whose encryption the client saw
// succeed is acknowledged and kept, to be opened again afterwards; every
// request the client saw fail is counted with its start time. Every eighth
// round trip is a stream of two or three chunks, which HAProxy cannot replay.
type load struct {
	api  *client.Client
	stop chan struct{}
	wg   sync.WaitGroup
	ok   atomic.Int64 // round trips that succeeded

	mu       sync.Mutex
	acks     []ack
	failures []failure
	corrupt  []string // decryptions that succeeded with the wrong plaintext
}

// ack is an acknowledged ciphertext.
type ack struct {
	ct, aad []byte
	sum     [32]byte // SHA-256 of the plaintext
	stream  bool
}

// failure is a request the client saw fail.
type failure struct {
	start time.Time
	op    string
	err   error
}

func startLoad(api *client.Client, workers int) *load {
	l := &load{api: api, stop: make(chan struct{})}
	for w := range workers {
		l.wg.Add(1)
		go l.worker(w)
	}
	return l
}

// workerRate paces each worker (round trips per second), so that the number
// of acknowledged ciphertexts kept for verification does not grow with the
// speed of the machine.
const workerRate = 100

func (l *load) worker(w int) {
	defer l.wg.Done()
	tick := time.NewTicker(time.Second / workerRate)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		stream := n%8 == 7
		size := 16 + n%1000
		if stream {
			size = 20<<10 + n%(24<<10) // two or three 16 KiB chunks
		}
		pt := make([]byte, size)
		rand.Read(pt)
		aad := fmt.Appendf(nil, "worker %d round trip %d", w, n)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		l.roundTrip(ctx, pt, aad, stream)
		cancel()
	}
}

func (l *load) roundTrip(ctx context.Context, pt, aad []byte, stream bool) {
	start := time.Now()
	var ct []byte
	var err error
	if stream {
		var buf bytes.Buffer
		_, err = l.api.EncryptStream(ctx, testKey, &buf, bytes.NewReader(pt), aad)
		ct = buf.Bytes()
	} else {
		var res *api.EncryptResult
		res, err = l.api.Encrypt(ctx, testKey, pt, aad)
		if err == nil {
			ct = res.Ciphertext
		}
	}
	if err != nil {
		l.fail(start, kind("encrypt", stream), err)
		return
	}
	l.mu.Lock()
	l.acks = append(l.acks, ack{ct: ct, aad: aad, sum: sha256.Sum256(pt), stream: stream})
	l.mu.Unlock()

	start = time.Now()
	got, err := open(ctx, l.api, ack{ct: ct, aad: aad, stream: stream})
	if err != nil {
		l.fail(start, kind("decrypt", stream), err)
		return
	}
	if !bytes.Equal(got, pt) {
		l.mu.Lock()
		l.corrupt = append(l.corrupt, string(aad))
		l.mu.Unlock()
		return
	}
	l.ok.Add(1)
}

func kind(op string, stream bool) string {
	if stream {
		return op + " (stream)"
	}
	return op + " (JSON)"
}

func (l *load) fail(start time.Time, op string, err error) {
	l.mu.Lock()
	l.failures = append(l.failures, failure{start, op, err})
	l.mu.Unlock()
}

// open decrypts an acknowledged ciphertext through api.
func open(ctx context.Context, api *client.Client, a ack) ([]byte, error) {
	if !a.stream {
		return api.Decrypt(ctx, testKey, a.ct, a.aad)
	}
	var out bytes.Buffer
	_, err := api.DecryptStream(ctx, testKey, &out, bytes.NewReader(a.ct), a.aad)
	return out.Bytes(), err
}

// waitProgress waits until n more round trips than now have succeeded.
func (l *load) waitProgress(t *testing.T, n int64) {
	t.Helper()
	target := l.ok.Load() + n
	if !proctest.Poll(20*time.Second, func() bool { return l.ok.Load() >= target }) {
		t.Fatalf("the load made no progress: %d round trips, want %d", l.ok.Load(), target)
	}
}

// finish stops the workers and waits for them.
func (l *load) finish() {
	close(l.stop)
	l.wg.Wait()
}

// failuresSince returns the failures of requests started at or after t0.
func (l *load) failuresSince(t0 time.Time) []failure {
	var fs []failure
	for _, f := range l.failures {
		if !f.start.Before(t0) {
			fs = append(fs, f)
		}
	}
	return fs
}

// verifyAcks opens every acknowledged ciphertext through the given clients in
// turn and fails the test for any that does not open to its plaintext.
func verifyAcks(t *testing.T, acks []ack, apis []*client.Client) {
	t.Helper()
	var mu sync.Mutex
	var lost []error
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(acks) {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				got, err := open(ctx, apis[i%len(apis)], acks[i])
				cancel()
				if err == nil && sha256.Sum256(got) != acks[i].sum {
					err = fmt.Errorf("%q opened to another plaintext", acks[i].aad)
				}
				if err != nil {
					mu.Lock()
					lost = append(lost, err)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(lost) > 0 {
		t.Fatalf("%d of %d acknowledged ciphertexts are lost or corrupt; first: %v", len(lost), len(acks), lost[0])
	}
}

// summary describes failures for the log.
func summary(fs []failure) string {
	if len(fs) == 0 {
		return "none"
	}
	return fmt.Sprintf("%d, first (started %s): %s: %v", len(fs), fs[0].start.UTC().Format("15:04:05.000"), fs[0].op, fs[0].err)
}
