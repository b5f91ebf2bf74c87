package keystoretest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cipherd/cipherd/cryptosvc"
)

type key = cryptosvc.StoredKey

func testRead(t *testing.T, kind Kind) {
	ctx := context.Background()
	keys := []*key{Key(t, "beta", 3), Key(t, "alpha", 1), Key(t, "Zeta_9.x-y", 2), Key(t, "0", 1)}
	keys[1].Config = cryptosvc.KeyConfig{} // the zero configuration round-trips too
	keys[2].Config.MinDecryptionVersion = 2
	keys[2].Config.AEAD = "chacha20-poly1305"
	s := kind.Open(t, keys)

	names, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0", "Zeta_9.x-y", "alpha", "beta"}; !slices.Equal(names, want) {
		t.Fatalf("List = %q, want %q", names, want)
	}
	names[0] = "mutated"
	if again, _ := s.List(ctx); again[0] != "0" {
		t.Fatal("List shares its slice with the store")
	}
	for _, want := range keys {
		got, err := s.Get(ctx, want.Name)
		if err != nil {
			t.Fatal(err)
		}
		AssertKey(t, got, want)
		if got.Revision == 0 {
			t.Errorf("key %s: revision 0", want.Name)
		}
		got, err = s.Refresh(ctx, want.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		AssertKey(t, got, want)
	}
	for _, name := range []string{"gamma", "", "ALPHA", "../alpha", "alpha.key", strings.Repeat("a", 1000)} {
		if _, err := s.Get(ctx, name); !notFound(err) {
			t.Errorf("Get(%q) = %v, want ErrKeyNotFound", name, err)
		}
		if _, err := s.Refresh(ctx, name, nil); !notFound(err) {
			t.Errorf("Refresh(%q) = %v, want ErrKeyNotFound", name, err)
		}
	}

	if kind.ReadOnly {
		k := Key(t, "gamma", 1)
		if err := s.Create(ctx, k); !errors.Is(err, cryptosvc.ErrReadOnly) {
			t.Errorf("Create = %v, want ErrReadOnly", err)
		}
		if err := s.Update(ctx, MustGet(t, s, "beta")); !errors.Is(err, cryptosvc.ErrReadOnly) {
			t.Errorf("Update = %v, want ErrReadOnly", err)
		}
		if err := s.Delete(ctx, "alpha", MustGet(t, s, "alpha").Revision); !errors.Is(err, cryptosvc.ErrReadOnly) {
			t.Errorf("Delete = %v, want ErrReadOnly", err)
		}
		if names, _ := s.List(ctx); len(names) != len(keys) {
			t.Errorf("a refused write changed the store: %q", names)
		}
	}
}

func testCreate(t *testing.T, kind Kind) {
	if kind.ReadOnly {
		t.Skip("read-only: covered by Read")
	}
	ctx := context.Background()
	s := kind.Open(t, nil)
	if names, err := s.List(ctx); err != nil || len(names) != 0 {
		t.Fatalf("empty store lists %q, %v", names, err)
	}
	a := Key(t, "a", 2)
	if err := s.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	AssertKey(t, MustGet(t, s, "a"), a)

	dup := Key(t, "a", 1)
	if err := s.Create(ctx, dup); !errors.Is(err, cryptosvc.ErrKeyExists) {
		t.Fatalf("second Create = %v, want ErrKeyExists", err)
	}
	AssertKey(t, MustGet(t, s, "a"), a) // the refused Create changed nothing
}

func testUpdate(t *testing.T, kind Kind) {
	if kind.ReadOnly {
		t.Skip("read-only: covered by Read")
	}
	ctx := context.Background()
	s := kind.Open(t, []*key{Key(t, "a", 1)})

	// A rotation.
	b := MustGet(t, s, "a").Clone()
	AddVersion(t, b, Secret(t))
	if err := s.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	AssertKey(t, MustGet(t, s, "a"), b)

	// A new configuration.
	c := MustGet(t, s, "a").Clone()
	c.Config = cryptosvc.KeyConfig{MinDecryptionVersion: 2, AEAD: "aes-128-gcm"}
	if err := s.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	AssertKey(t, MustGet(t, s, "a"), c)

	if err := s.Update(ctx, Key(t, "missing", 1)); !notFound(err) {
		t.Fatalf("Update of a missing key = %v, want ErrKeyNotFound", err)
	}
	if _, err := s.Get(ctx, "missing"); !notFound(err) {
		t.Fatal("Update of a missing key created it")
	}
}

// testRevision: a write made from a stale read fails with ErrConflict and
// changes nothing; the store then serves the newer key.
func testRevision(t *testing.T, kind Kind) {
	if kind.ReadOnly {
		t.Skip("read-only")
	}
	ctx := context.Background()
	s := kind.Open(t, []*key{Key(t, "a", 1), Key(t, "b", 1)})
	read := MustGet(t, s, "a").Clone()
	first := read.Clone()
	AddVersion(t, first, Secret(t))
	if err := s.Update(ctx, first); err != nil {
		t.Fatal(err)
	}
	won := MustGet(t, s, "a")
	if won.Revision == read.Revision {
		t.Fatalf("Update kept revision %d", won.Revision)
	}
	if other := MustGet(t, s, "b"); other.Revision == won.Revision {
		t.Fatalf("keys a and b share revision %d", won.Revision)
	}

	// The second writer read version 1 too and also makes a version 2.
	second := read.Clone()
	AddVersion(t, second, Secret(t))
	if err := s.Update(ctx, second); !errors.Is(err, cryptosvc.ErrConflict) {
		t.Fatalf("stale Update = %v, want ErrConflict", err)
	}
	AssertKey(t, MustGet(t, s, "a"), first)
	cfg := read.Clone()
	cfg.Config.DeletionAllowed = false
	if err := s.Update(ctx, cfg); !errors.Is(err, cryptosvc.ErrConflict) {
		t.Fatalf("stale configuration = %v, want ErrConflict", err)
	}
	if err := s.Delete(ctx, "a", read.Revision); !errors.Is(err, cryptosvc.ErrConflict) {
		t.Fatalf("stale Delete = %v, want ErrConflict", err)
	}
	AssertKey(t, MustGet(t, s, "a"), first)

	// Read again, retry: it applies.
	retry := MustGet(t, s, "a").Clone()
	AddVersion(t, retry, Secret(t))
	if err := s.Update(ctx, retry); err != nil {
		t.Fatal(err)
	}
	AssertKey(t, MustGet(t, s, "a"), retry)
	if err := s.Delete(ctx, "a", MustGet(t, s, "a").Revision); err != nil {
		t.Fatal(err)
	}

	// A revision never comes back: a key deleted and created again does
	// not accept a write read from its former self.
	old := MustGet(t, s, "b")
	if err := s.Delete(ctx, "b", old.Revision); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, Key(t, "b", 1)); err != nil {
		t.Fatal(err)
	}
	stale := old.Clone()
	stale.Versions = slices.Clone(MustGet(t, s, "b").Versions)
	AddVersion(t, stale, Secret(t))
	if err := s.Update(ctx, stale); !errors.Is(err, cryptosvc.ErrConflict) {
		t.Fatalf("Update with the revision of a deleted key = %v, want ErrConflict", err)
	}
}

// testAppendOnly: an update cannot drop or replace a version.
func testAppendOnly(t *testing.T, kind Kind) {
	if kind.ReadOnly {
		t.Skip("read-only")
	}
	ctx := context.Background()
	a := Key(t, "a", 3)
	s := kind.Open(t, []*key{a})
	for name, mod := range map[string]func(k *key){
		"drop last":   func(k *key) { k.Versions = k.Versions[:2] },
		"new secret":  func(k *key) { k.Versions[1].Secret = Secret(t) },
		"new created": func(k *key) { k.Versions[0].Created = k.Versions[0].Created.Add(time.Second) },
	} {
		k := MustGet(t, s, "a").Clone()
		k.Versions = slices.Clone(k.Versions)
		mod(k)
		if err := s.Update(ctx, k); !errors.Is(err, cryptosvc.ErrInvalidConfig) {
			t.Errorf("%s: Update = %v, want ErrInvalidConfig", name, err)
		}
	}
	AssertKey(t, MustGet(t, s, "a"), a)
}

func testDelete(t *testing.T, kind Kind) {
	if kind.ReadOnly {
		t.Skip("read-only: covered by Read")
	}
	ctx := context.Background()
	s := kind.Open(t, []*key{Key(t, "a", 1), Key(t, "b", 1)})
	rev := MustGet(t, s, "a").Revision
	if err := s.Delete(ctx, "a", rev); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "a"); !notFound(err) {
		t.Fatalf("Get after Delete = %v", err)
	}
	if names, _ := s.List(ctx); !slices.Equal(names, []string{"b"}) {
		t.Fatalf("List after Delete = %q", names)
	}
	if err := s.Delete(ctx, "a", rev); !notFound(err) {
		t.Fatalf("second Delete = %v, want ErrKeyNotFound", err)
	}
	if err := s.Delete(ctx, "../b", MustGet(t, s, "b").Revision); !notFound(err) {
		t.Fatalf("Delete(../b) = %v, want ErrKeyNotFound", err)
	}
	// The name is free again.
	a2 := Key(t, "a", 3)
	if err := s.Create(ctx, a2); err != nil {
		t.Fatal(err)
	}
	AssertKey(t, MustGet(t, s, "a"), a2)
}

func testInvalid(t *testing.T, kind Kind) {
	ctx := context.Background()
	existing := Key(t, "valid", 2)
	s := kind.Open(t, []*key{existing})
	for _, tc := range InvalidKeys(t) {
		want := tc.Want
		if kind.ReadOnly {
			want = cryptosvc.ErrReadOnly
		}
		if tc.Key != nil {
			tc.Key.Revision = MustGet(t, s, "valid").Revision
		}
		if err := s.Create(ctx, tc.Key); !errors.Is(err, want) {
			t.Errorf("%s: Create = %v, want %v", tc.Name, err, want)
		}
		if err := s.Update(ctx, tc.Key); !errors.Is(err, want) {
			t.Errorf("%s: Update = %v, want %v", tc.Name, err, want)
		}
	}
	if names, _ := s.List(ctx); !slices.Equal(names, []string{"valid"}) {
		t.Fatalf("invalid keys reached the store: %q", names)
	}
	AssertKey(t, MustGet(t, s, "valid"), existing)
}

func testIsolation(t *testing.T, kind Kind) {
	ctx := context.Background()
	a := Key(t, "a", 2)
	want := a.Clone()
	s := kind.Open(t, []*key{a})

	// Mutating what was stored (for the keyring: what was written) does
	// not reach the store.
	scramble(t, a)
	AssertKey(t, MustGet(t, s, "a"), want)

	if kind.ReadOnly {
		return
	}
	u := MustGet(t, s, "a").Clone()
	u.Config.AllowedAEADs = slices.Clone(u.Config.AllowedAEADs)
	AddVersion(t, u, Secret(t))
	uWant := u.Clone()
	if err := s.Update(ctx, u); err != nil {
		t.Fatal(err)
	}
	scramble(t, u)
	AssertKey(t, MustGet(t, s, "a"), uWant)
}

// scramble modifies k in every place a shallow copy would share.
func scramble(t *testing.T, k *key) {
	k.Versions[0].Secret = Secret(t)
	k.Versions[0].Created = time.Unix(0, 0)
	k.Config.AllowedAEADs[0] = "aes-128-gcm"
	k.Config.MinDecryptionVersion = 1
	AddVersion(t, k, Secret(t))
}

func testConcurrent(t *testing.T, kind Kind) {
	ctx := context.Background()
	const writers, rounds = 4, 12
	var initial []*key
	for w := range writers {
		initial = append(initial, Key(t, fmt.Sprintf("w%d", w), 1))
	}
	s := kind.Open(t, initial)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 64)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	for range 4 { // readers
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				names, err := s.List(ctx)
				if err != nil {
					report(err)
					return
				}
				for _, n := range names {
					k, err := s.Get(ctx, n)
					if notFound(err) && strings.HasPrefix(n, "tmp") {
						continue // deleted since List
					}
					if err != nil {
						report(err)
						return
					}
					if err := k.Validate(); err != nil {
						report(fmt.Errorf("reader saw an invalid key: %w", err))
						return
					}
					_ = k.Latest().Secret.Expose()[0]
				}
			}
		})
	}
	var wwg sync.WaitGroup
	if !kind.ReadOnly {
		for w := range writers {
			wwg.Go(func() {
				name := fmt.Sprintf("w%d", w)
				tmp := fmt.Sprintf("tmp%d", w)
				for range rounds {
					k, err := s.Get(ctx, name)
					if err != nil {
						report(err)
						return
					}
					k = k.Clone()
					AddVersion(t, k, Secret(t))
					if err := s.Update(ctx, k); err != nil {
						report(err)
						return
					}
					if err := s.Create(ctx, Key(t, tmp, 1)); err != nil {
						report(err)
						return
					}
					k, err = s.Get(ctx, tmp)
					if err == nil {
						err = s.Delete(ctx, tmp, k.Revision)
					}
					if err != nil {
						report(err)
						return
					}
				}
			})
		}
	} else {
		time.Sleep(50 * time.Millisecond)
	}
	wwg.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if kind.ReadOnly {
		return
	}
	for w := range writers {
		k := MustGet(t, s, fmt.Sprintf("w%d", w))
		if len(k.Versions) != rounds+1 {
			t.Errorf("w%d: %d versions, want %d", w, len(k.Versions), rounds+1)
		}
	}
	if names, _ := s.List(ctx); len(names) != writers {
		t.Errorf("List = %q", names)
	}
}

// testConcurrentRotations: writers that race on one key, each retrying
// its read-modify-write on ErrConflict, add exactly one version each. With
// peers, the writers are spread over the stores.
func testConcurrentRotations(t *testing.T, kind Kind, stores []cryptosvc.Keystore) {
	if kind.ReadOnly {
		t.Skip("read-only")
	}
	ctx := context.Background()
	if stores == nil {
		stores = []cryptosvc.Keystore{kind.Open(t, []*key{Key(t, "hot", 1)})}
	} else {
		if err := stores[0].Create(ctx, Key(t, "hot", 1)); err != nil {
			t.Fatal(err)
		}
		for _, s := range stores[1:] {
			if _, err := s.Refresh(ctx, "hot", nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	const writers, each = 8, 5
	var wg sync.WaitGroup
	var mu sync.Mutex
	mine := map[string]int{} // secret → writer, to find every version's author
	conflicts := 0
	errs := make(chan error, writers)
	for w := range writers {
		s := stores[w%len(stores)]
		wg.Go(func() {
			for range each {
				sec := Secret(t)
				for {
					k, err := s.Get(ctx, "hot")
					if err != nil {
						errs <- err
						return
					}
					k = k.Clone()
					AddVersion(t, k, sec)
					err = s.Update(ctx, k)
					if errors.Is(err, cryptosvc.ErrConflict) {
						mu.Lock()
						conflicts++
						mu.Unlock()
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					break
				}
				mu.Lock()
				mine[string(sec.Expose())] = w
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, s := range stores {
		k, err := s.Refresh(ctx, "hot", nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(k.Versions) != 1+writers*each {
			t.Fatalf("%d versions, want %d", len(k.Versions), 1+writers*each)
		}
		seen := map[string]bool{}
		for _, v := range k.Versions[1:] {
			sec := string(v.Secret.Expose())
			if _, ok := mine[sec]; !ok || seen[sec] {
				t.Fatalf("version %d is not one writer's own, or appears twice", v.Version)
			}
			seen[sec] = true
		}
	}
	t.Logf("%d conflicts retried", conflicts)
}

// testWatch: every write calls the watchers with the key's name; stop
// ends the calls.
func testWatch(t *testing.T, kind Kind) {
	if kind.ReadOnly {
		t.Skip("read-only: the keyring's reload notifications have their own test")
	}
	ctx := context.Background()
	s := kind.Open(t, nil)
	ch := make(chan string, 16)
	stop := s.Watch(func(name string) {
		select {
		case ch <- name:
		default:
		}
	})
	expect := func(what, name string) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case got := <-ch:
				if got == name {
					return
				}
			case <-deadline:
				t.Fatalf("%s: no notification for %s", what, name)
			}
		}
	}
	if err := s.Create(ctx, Key(t, "w", 1)); err != nil {
		t.Fatal(err)
	}
	expect("Create", "w")
	k := MustGet(t, s, "w").Clone()
	AddVersion(t, k, Secret(t))
	if err := s.Update(ctx, k); err != nil {
		t.Fatal(err)
	}
	expect("Update", "w")
	if err := s.Delete(ctx, "w", MustGet(t, s, "w").Revision); err != nil {
		t.Fatal(err)
	}
	expect("Delete", "w")
	stop()
	for len(ch) > 0 {
		<-ch
	}
	if err := s.Create(ctx, Key(t, "after", 1)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	for len(ch) > 0 {
		if n := <-ch; n == "after" {
			t.Fatal("a stopped watcher was called")
		}
	}
}

// testShared: two stores over the same data (two replicas) see each
// other's writes, notify each other, and lose races to each other with
// ErrConflict, never with a lost update.
func testShared(t *testing.T, kind Kind) {
	ctx := context.Background()
	a := kind.Open(t, []*key{Key(t, "s", 1)})
	b := kind.Peer(t, a)
	AssertKey(t, MustGet(t, b, "s"), MustGet(t, a, "s"))

	seen := make(chan string, 16)
	defer b.Watch(func(name string) {
		select {
		case seen <- name:
		default:
		}
	})()
	k := MustGet(t, a, "s").Clone()
	AddVersion(t, k, Secret(t))
	start := time.Now()
	if err := a.Update(ctx, k); err != nil {
		t.Fatal(err)
	}
	select {
	case <-seen:
	case <-time.After(5 * time.Second):
		t.Fatal("the peer was not notified of the rotation")
	}
	AssertKey(t, MustGet(t, b, "s"), k)
	t.Logf("the peer saw the rotation after %v", time.Since(start))

	// b's copy is now current; a stale one from before the rotation loses.
	stale := k.Clone()
	stale.Versions = stale.Versions[:1]
	stale.Revision = 0
	AddVersion(t, stale, Secret(t))
	if err := b.Update(ctx, stale); err == nil {
		t.Fatal("an update without the current revision applied")
	}

	if err := b.Create(ctx, Key(t, "fromb", 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Refresh(ctx, "fromb", nil); err != nil {
		t.Fatalf("a's Refresh of b's new key: %v", err)
	}
	testConcurrentRotations(t, kind, []cryptosvc.Keystore{a, b})
	if err := a.Delete(ctx, "fromb", MustGet(t, a, "fromb").Revision); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := b.Get(ctx, "fromb"); notFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the peer still serves a deleted key")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testClose(t *testing.T, kind Kind) {
	ctx := context.Background()
	s := kind.Open(t, []*key{Key(t, "a", 1)})
	rev := MustGet(t, s, "a").Revision
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, cryptosvc.ErrClosed) {
		t.Errorf("Get after Close = %v", err)
	}
	if _, err := s.List(ctx); !errors.Is(err, cryptosvc.ErrClosed) {
		t.Errorf("List after Close = %v", err)
	}
	want := cryptosvc.ErrClosed
	if kind.ReadOnly {
		want = cryptosvc.ErrReadOnly
	}
	if err := s.Create(ctx, Key(t, "b", 1)); !errors.Is(err, want) {
		t.Errorf("Create after Close = %v, want %v", err, want)
	}
	k := Key(t, "a", 2)
	k.Revision = rev
	if err := s.Update(ctx, k); !errors.Is(err, want) {
		t.Errorf("Update after Close = %v, want %v", err, want)
	}
	if err := s.Delete(ctx, "a", rev); !errors.Is(err, want) {
		t.Errorf("Delete after Close = %v, want %v", err, want)
	}
}
