package server

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"
	"time"
)

// TestJWTCache: an entry serves until its token's exp and while its key is
// held; a full cache drops the entries no longer valid first, then others,
// down to 90 %; a nil cache holds nothing.
func TestJWTCache(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	held, rotated := &jwk{kid: "a"}, &jwk{kid: "b"}
	src := &jwksSource{}
	src.keys.Store(&jwkSet{byKid: map[string][]*jwk{"a": {held}}, n: 1})
	id := &identity{name: "x"}
	sum := func(i int) [sha256.Size]byte {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(i))
		return sha256.Sum256(b[:])
	}
	entry := func(exp time.Time, k *jwk) *jwtCached {
		return &jwtCached{id: id, src: src, key: k, exp: exp.Unix()}
	}

	c := newJWTCache(10)
	c.put(sum(0), entry(now.Add(time.Minute), held), now)
	if c.get(sum(0), now) != id || c.get(sum(0), now.Add(59*time.Second)) != id {
		t.Error("a valid entry is not served")
	}
	if c.get(sum(0), now.Add(time.Minute)) != nil || c.n.Load() != 0 {
		t.Error("an entry is served at its token's exp, or kept")
	}
	c.put(sum(1), entry(now.Add(-time.Second), held), now)
	if c.n.Load() != 0 {
		t.Error("a token past its exp (accepted within the skew) is remembered")
	}
	c.put(sum(2), entry(now.Add(time.Minute), rotated), now)
	if c.n.Load() != 0 {
		t.Error("a token of a key no longer held is remembered")
	}
	c.put(sum(3), entry(now.Add(time.Minute), held), now)
	src.keys.Store(&jwkSet{byKid: map[string][]*jwk{"b": {rotated}}, n: 1})
	if c.get(sum(3), now) != nil || c.n.Load() != 0 {
		t.Error("a token of a key rotated away is served, or kept")
	}

	// Full: expired entries go first, then others down to 90 %.
	src.keys.Store(&jwkSet{byKid: map[string][]*jwk{"a": {held}}, n: 1})
	for i := range 10 {
		exp := now.Add(time.Hour)
		if i < 3 {
			exp = now.Add(time.Minute)
		}
		c.put(sum(100+i), entry(exp, held), now)
	}
	later := now.Add(2 * time.Minute) // the first three have expired
	c.put(sum(200), entry(now.Add(time.Hour), held), later)
	if n := c.n.Load(); n != 8 {
		t.Errorf("%d entries after an eviction of the three expired ones, want 8", n)
	}
	for i := range 3 {
		if _, ok := c.m.Load(sum(100 + i)); ok {
			t.Errorf("expired entry %d kept over valid ones", i)
		}
	}
	for i := range 5 {
		c.put(sum(300+i), entry(now.Add(time.Hour), held), later)
	}
	if n := c.n.Load(); n > 10 {
		t.Errorf("%d entries, over the bound of 10", n)
	}
	count := int64(0)
	c.m.Range(func(any, any) bool { count++; return true })
	if count != c.n.Load() {
		t.Errorf("%d entries counted, %d held", c.n.Load(), count)
	}

	var none *jwtCache
	none.put(sum(0), entry(now.Add(time.Hour), held), now)
	if none.get(sum(0), now) != nil {
		t.Error("a nil cache served an entry")
	}
}
