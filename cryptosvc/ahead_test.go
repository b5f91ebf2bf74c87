package cryptosvc

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cipherd/cipherd/kernels"
)

func skipWithoutAhead(t testing.TB) {
	t.Helper()
	if !kernels.SHA512x4Available() {
		t.Skip("no four-lane SHA-512 on this host")
	}
}

// expand4 gives each lane what expand gives its info alone: PRKs of both
// sizes, infos from empty to several blocks long, outputs of one to four
// blocks, and four different infos per call.
func TestExpand4MatchesExpand(t *testing.T) {
	skipWithoutAhead(t)
	rng := rand.New(rand.NewPCG(3, 4))
	fill := func(b []byte) {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	}
	var hs kernels.SHA512x4
	var scratch [aheadLanes][]byte
	for _, keyLen := range []int{16, 32, 64, 128} {
		key := make([]byte, keyLen)
		fill(key)
		p := newPRKAhead(key)
		if p.pads == nil {
			t.Fatalf("a %d-byte PRK has no pads", keyLen)
		}
		for _, infoLen := range []int{0, 1, 46, 47, 110, 111, 112, 174, 175, 300, 1000} {
			for _, n := range []int{1, 60, 64, 76, 128, 200, 256} {
				var outs, got, infos [aheadLanes][]byte
				for j := range aheadLanes {
					infos[j] = make([]byte, infoLen)
					fill(infos[j])
					outs[j] = make([]byte, n)
					got[j] = outs[j]
				}
				p.expand4(&hs, &scratch, &outs, &infos)
				for j := range aheadLanes {
					want := make([]byte, n)
					p.expand(want, infos[j])
					if !bytes.Equal(got[j], want) {
						t.Fatalf("key %d, info %d, out %d, lane %d: %x, want %x", keyLen, infoLen, n, j, got[j], want)
					}
				}
			}
		}
	}
	for j := range aheadLanes {
		if len(scratch[j]) > 0 && bytes.Count(scratch[j][:cap(scratch[j])], []byte{0}) != cap(scratch[j]) {
			t.Errorf("lane %d's scratch space holds what it hashed", j)
		}
	}
}

// countingReader is a deterministic randomness source that records what it
// handed out.
type countingReader struct {
	mu    sync.Mutex
	rng   *rand.ChaCha8
	out   bytes.Buffer
	reads map[int]int // reads by length
}

func (r *countingReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rng.Read(p)
	r.out.Write(p)
	if r.reads == nil {
		r.reads = map[int]int{}
	}
	r.reads[len(p)]++
	return len(p), nil
}

// A local sealer's messages take their salts from the randomness in order,
// none skipped twice and none used twice, whether its messages share a
// context (four derived at a time) or change context (the queue dropped),
// and every message opens on the service under its own context only.
func TestLocalSealerAheadSalts(t *testing.T) {
	skipWithoutAhead(t)
	ctx := context.Background()
	for _, c := range SealAEADs {
		s, sk, l := newTestSealer(t, c)
		rnd := &countingReader{rng: rand.NewChaCha8([32]byte{byte(c)})}
		l.rand = rnd
		hlen := len(sk.Header)
		contexts := []string{"a", "a", "a", "a", "a", "a", "a", "b", "a", "a", "a", "", "", "", "", "", "", string(make([]byte, aheadMaxContext+1)), string(make([]byte, aheadMaxContext+1))}
		seen := map[string]bool{}
		var salts []byte
		for i, cx := range contexts {
			pt := []byte(fmt.Sprintf("message %d", i))
			ct, err := l.Seal(nil, pt, []byte(cx))
			if err != nil {
				t.Fatal(err)
			}
			salt := ct[hlen : hlen+saltSize]
			if seen[string(salt)] {
				t.Fatalf("%s: message %d reuses a salt", c, i)
			}
			seen[string(salt)] = true
			salts = append(salts, salt...)
			if i == 1 && (l.ahead.n != aheadLanes || l.ahead.next != 1) {
				t.Fatalf("%s: the second message with one context did not derive four (queue %d of %d)", c, l.ahead.next, l.ahead.n)
			}
			if got, _, err := s.Open(ctx, "k", ct, []byte(cx)); err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("%s: message %d (context %q): %v", c, i, cx[:min(len(cx), 8)], err)
			}
			if _, _, err := s.Open(ctx, "k", ct, []byte(cx+"x")); err == nil {
				t.Fatalf("%s: message %d opens under another context", c, i)
			}
		}
		// Every salt used came from the randomness, in order; a queue
		// dropped at a change of context leaves a gap of unused salts,
		// never a salt used out of turn.
		all := rnd.out.Bytes()
		pos := 0
		for i := 0; i < len(salts); i += saltSize {
			k := bytes.Index(all[pos:], salts[i:i+saltSize])
			if k < 0 || k%saltSize != 0 {
				t.Fatalf("%s: message %d's salt is not the next the randomness gave", c, i/saltSize)
			}
			pos += k + saltSize
		}
	}
}

// Goroutines sealing with one local sealer get distinct salts and messages
// that open (run with -race: the queue is shared).
func TestLocalSealerAheadConcurrent(t *testing.T) {
	ctx := context.Background()
	s, _, l := newTestSealer(t, kernels.AES256GCM)
	const workers, each = 4, 50
	cts := make([][][]byte, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				ct, err := l.Seal(nil, []byte{byte(w), byte(i)}, []byte("same"))
				if err != nil {
					t.Error(err)
					return
				}
				cts[w] = append(cts[w], ct)
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for w := range workers {
		for i, ct := range cts[w] {
			if got, _, err := s.Open(ctx, "k", ct, []byte("same")); err != nil || !bytes.Equal(got, []byte{byte(w), byte(i)}) {
				t.Fatalf("worker %d, message %d: %v", w, i, err)
			}
			key := string(ct[:len(ct)-16])
			if seen[key] {
				t.Fatalf("worker %d, message %d: a message made twice", w, i)
			}
			seen[key] = true
		}
	}
}

// BenchmarkDeriveAhead is the key derivation of one message of a sealer
// that makes many with one context (a quarter of a four-lane derivation,
// and the salt), to set against BenchmarkLocalSeal/*/derive's one at a
// time.
func BenchmarkDeriveAhead(b *testing.B) {
	skipWithoutAhead(b)
	for _, c := range SealAEADs {
		b.Run(c.String(), func(b *testing.B) {
			key := make([]byte, c.KeySize())
			p := newPRKAhead(key)
			var a keysAhead
			var salt [saltSize]byte
			var out [32 + chunkNonceSize + commitmentSize]byte
			o := out[:c.KeySize()+chunkNonceSize+commitmentSize]
			id := aeadID(c)
			a.take(zeros{}, p, id, nil, salt[:], o)
			for b.Loop() {
				a.take(zeros{}, p, id, nil, salt[:], o)
			}
		})
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// A queue filled for one PRK, AEAD or length is not served to another: what
// take gives for a different one is that one's own derivation for the salt
// it gives.
func TestKeysAheadMatchesItsInputs(t *testing.T) {
	skipWithoutAhead(t)
	k1, k2 := make([]byte, 32), make([]byte, 32)
	k2[0] = 1
	p1, p2 := newPRKAhead(k1), newPRKAhead(k2)
	rnd := &countingReader{rng: rand.NewChaCha8([32]byte{7})}
	aes := aeadID(kernels.AES256GCM)
	var salt [saltSize]byte
	for _, c := range []struct {
		name string
		p    prk
		id   uint8
		n    int
	}{
		{"another PRK", p2, aes, 76},
		{"another AEAD", p1, aeadID(kernels.ChaCha20Poly1305), 76},
		{"another length", p1, aes, 60},
	} {
		var a keysAhead
		out := make([]byte, 76)
		for range 2 { // the second fills the queue for p1
			if _, err := a.take(rnd, p1, aes, nil, salt[:], out); err != nil {
				t.Fatal(err)
			}
		}
		if a.next != 1 || a.n != aheadLanes {
			t.Fatalf("%s: queue %d of %d after two takes", c.name, a.next, a.n)
		}
		got := make([]byte, c.n)
		ok, err := a.take(rnd, c.p, c.id, nil, salt[:], got)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, c.n)
		c.p.expand(want, chunkedInfoPrefix, ianaNames[c.id], zeroByte, salt[:], nil)
		if ok && !bytes.Equal(got, want) { // not ok: the caller derives its own
			t.Errorf("%s: got the queue's key, not its own", c.name)
		}
	}
}

// Contexts that change every other message waste at most one four-lane
// derivation: after keys are dropped unused, the queue waits for a longer
// run. Long runs of one context are still derived four at a time.
func TestKeysAheadBacksOff(t *testing.T) {
	skipWithoutAhead(t)
	p := newPRKAhead(make([]byte, 32))
	aes := aeadID(kernels.AES256GCM)
	count := func(contexts []string) (derived, used int) {
		rnd := &countingReader{rng: rand.NewChaCha8([32]byte{9})}
		var a keysAhead
		var salt [saltSize]byte
		out := make([]byte, 76)
		for _, cx := range contexts {
			if ok, err := a.take(rnd, p, aes, []byte(cx), salt[:], out); err != nil {
				t.Fatal(err)
			} else if !ok {
				continue // derived alone by the caller, reading nothing here
			}
			used++
		}
		return rnd.out.Len() / saltSize, used
	}
	var pairs []string
	for range 20 {
		pairs = append(pairs, "a", "a", "b", "b")
	}
	if derived, used := count(pairs); derived-used > aheadLanes-1 {
		t.Errorf("contexts changing every other message: %d keys derived ahead, %d used", derived, used)
	}
	var long []string
	for range 10 {
		for range 10 {
			long = append(long, "x")
		}
		long = append(long, "y")
	}
	derived, used := count(long)
	if used < 60 || derived-used > 10*(aheadLanes-1) {
		t.Errorf("runs of ten: %d keys derived ahead, %d used; want at least 60 used", derived, used)
	}
}

// Service.Seal's one-shot messages share their version's queue: from
// goroutines at once, with one context and with contexts that change,
// every message opens under its own context only, no salt is used twice,
// and runs with one context read their salts four at a time.
func TestServiceSealAhead(t *testing.T) {
	skipWithoutAhead(t)
	ctx := context.Background()
	for _, c := range SealAEADs {
		s := newTestService(t, c)
		rnd := &countingReader{rng: rand.NewChaCha8([32]byte{byte(c)})}
		s.rand = rnd
		const workers, each = 4, 60
		msgs := make([][][]byte, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					cx := []byte("same")
					if w == 3 && i%3 == 0 {
						cx = []byte(fmt.Sprintf("other %d", i))
					}
					ct, _, err := s.Seal(ctx, "k", []byte{byte(w), byte(i)}, cx)
					if err != nil {
						t.Error(err)
						return
					}
					msgs[w] = append(msgs[w], ct, cx)
				}
			})
		}
		wg.Wait()
		seen := map[string]bool{}
		for w := range workers {
			for i := 0; i < len(msgs[w]); i += 2 {
				ct, cx := msgs[w][i], msgs[w][i+1]
				if got, _, err := s.Open(ctx, "k", ct, cx); err != nil || !bytes.Equal(got, []byte{byte(w), byte(i / 2)}) {
					t.Fatalf("%s: worker %d, message %d: %v", c, w, i/2, err)
				}
				if _, _, err := s.Open(ctx, "k", ct, append(cx, 'x')); err == nil {
					t.Fatalf("%s: worker %d, message %d opens under another context", c, w, i/2)
				}
				_, n, err := ParseHeader(ct)
				if err != nil {
					t.Fatal(err)
				}
				salt := string(ct[n : n+saltSize])
				if seen[salt] {
					t.Fatalf("%s: a salt used twice", c)
				}
				seen[salt] = true
			}
		}
		if rnd.reads[aheadLanes*saltSize] == 0 {
			t.Errorf("%s: no four salts read at once (reads by length %v)", c, rnd.reads)
		}
	}
}
