package keystoretest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cipherd/cipherd/cryptosvc"
)

// lifecycleKey returns a key with four versions, three of them retired,
// version 2 disabled and its deletion scheduled.
func lifecycleKey(t *testing.T, name string) *key {
	k := Key(t, name, 4)
	k.Config.MinDecryptionVersion = 3
	k.Disabled = []uint32{2}
	at := k.Created.Add(time.Hour)
	k.Deletion = &cryptosvc.KeyDeletion{Scheduled: at, DeleteAt: at.Add(30 * 24 * time.Hour)}
	return k
}

// testLifecycle: the lifecycle's state (disabled versions, a scheduled
// deletion, the versions a trim destroyed) is stored and read back with
// the key, by a peer too; a trim drops the versions below its
// min_available_version and nothing else.
func testLifecycle(t *testing.T, kind Kind) {
	ctx := context.Background()
	want := lifecycleKey(t, "a")
	s := kind.Open(t, []*key{want})
	AssertKey(t, MustGet(t, s, "a"), want)
	if kind.ReadOnly {
		return
	}
	var peer cryptosvc.Keystore
	if kind.Peer != nil {
		peer = kind.Peer(t, s)
	}
	checkPeer := func(want *key) {
		t.Helper()
		if peer == nil {
			return
		}
		got, err := peer.Refresh(ctx, "a", nil)
		if err != nil {
			t.Fatal(err)
		}
		AssertKey(t, got, want)
	}
	checkPeer(want)

	// The state changes, and goes.
	k := MustGet(t, s, "a").Clone()
	k.Disabled, k.Deletion = []uint32{1, 4}, nil
	if err := s.Update(ctx, k); err != nil {
		t.Fatal(err)
	}
	AssertKey(t, MustGet(t, s, "a"), k)
	checkPeer(k)

	// A trim to version 3: versions 1 and 2 go, with version 1's
	// disabled mark.
	trim := MustGet(t, s, "a").Clone()
	trim.Versions = trim.Versions[2:]
	trim.MinAvailable = 3
	trim.Disabled = []uint32{4}
	if err := s.Update(ctx, trim); err != nil {
		t.Fatalf("trim: %v", err)
	}
	AssertKey(t, MustGet(t, s, "a"), trim)
	checkPeer(trim)
	if got := MustGet(t, s, "a"); got.Version(2) != nil || got.Version(3) == nil {
		t.Fatalf("after the trim to 3: version 2 %v, version 3 %v", got.Version(2) != nil, got.Version(3) != nil)
	}

	// A rotation after the trim numbers on from the latest.
	rot := MustGet(t, s, "a").Clone()
	AddVersion(t, rot, Secret(t))
	if err := s.Update(ctx, rot); err != nil {
		t.Fatal(err)
	}
	if got := MustGet(t, s, "a"); got.Latest().Version != 5 || len(got.Versions) != 3 {
		t.Fatalf("after a rotation: latest %d, %d versions", got.Latest().Version, len(got.Versions))
	}
	checkPeer(rot)

	// Drops that are not a trim, or a trim past what it may, change
	// nothing.
	for name, mod := range map[string]func(k *key){
		"drop the latest": func(k *key) { k.Versions = k.Versions[:len(k.Versions)-1] },
		"trim the latest away": func(k *key) {
			k.MinAvailable, k.Config.MinDecryptionVersion = 6, 6
			k.Versions = []cryptosvc.StoredVersion{{KeyVersion: cryptosvc.KeyVersion{Version: 6, Created: k.Created}, Secret: Secret(t)}}
		},
		"trim and change material": func(k *key) {
			k.MinAvailable, k.Config.MinDecryptionVersion, k.Versions = 4, 5, k.Versions[1:]
			k.Versions[0].Secret = Secret(t)
		},
	} {
		k := MustGet(t, s, "a").Clone()
		k.Disabled = nil
		mod(k)
		if err := s.Update(ctx, k); !errors.Is(err, cryptosvc.ErrInvalidConfig) {
			t.Errorf("%s: Update = %v, want ErrInvalidConfig", name, err)
		}
	}
	AssertKey(t, MustGet(t, s, "a"), rot)
}
