package client_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/client"
	"github.com/cipherd/cipherd/server"
)

// The key lifecycle through the client against a real server: a deletion
// scheduled and cancelled, a version disabled and enabled, a trim, and an
// immediate deletion where the server allows it.
func TestClientKeyLifecycle(t *testing.T) {
	url, _ := startServerConfig(t, server.Config{KeyDeletionMinWait: time.Hour, AllowImmediateKeyDeletion: true})
	c := newClient(t, url)
	ctx := context.Background()
	if _, err := c.CreateKey(ctx, "life", api.CreateKeyRequest{KeyConfig: api.KeyConfig{DeletionAllowed: true}}); err != nil {
		t.Fatal(err)
	}
	v1, err := c.Encrypt(ctx, "life", []byte("one"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := c.RotateKey(ctx, "life"); err != nil {
			t.Fatal(err)
		}
	}
	v3, err := c.Encrypt(ctx, "life", []byte("three"), nil)
	if err != nil || v3.KeyVersion != 3 {
		t.Fatalf("encrypt under version 3: %+v, %v", v3, err)
	}

	// Scheduled with a wait, refused meanwhile, cancelled.
	if _, err := c.ScheduleKeyDeletion(ctx, "life", time.Minute); !client.IsCode(err, api.CodeInvalidDeletionWait) {
		t.Fatalf("a wait below the minimum: %v", err)
	}
	before := time.Now()
	k, err := c.ScheduleKeyDeletion(ctx, "life", 2*time.Hour)
	if err != nil || k.Deletion == nil || k.Deletion.DeleteAt.Before(before.Add(2*time.Hour-time.Second)) || k.Deletion.DeleteAt.After(time.Now().Add(2*time.Hour)) {
		t.Fatalf("schedule: %+v, %v", k, err)
	}
	if _, err := c.Decrypt(ctx, "life", v1.Ciphertext, nil); !client.IsCode(err, api.CodeKeyPendingDeletion) {
		t.Fatalf("decrypt while pending: %v", err)
	}
	if _, err := c.ScheduleKeyDeletion(ctx, "life", 2*time.Hour); !client.IsCode(err, api.CodeKeyPendingDeletion) {
		t.Fatalf("a second schedule: %v", err)
	}
	if k, err = c.CancelKeyDeletion(ctx, "life"); err != nil || k.Deletion != nil {
		t.Fatalf("cancel: %+v, %v", k, err)
	}
	if _, err := c.CancelKeyDeletion(ctx, "life"); !client.IsCode(err, api.CodeKeyNotPendingDeletion) {
		t.Fatalf("a second cancel: %v", err)
	}
	if pt, err := c.Decrypt(ctx, "life", v1.Ciphertext, nil); err != nil || string(pt) != "one" {
		t.Fatalf("decrypt after the cancel: %q, %v", pt, err)
	}

	// Disabled and enabled.
	if k, err = c.DisableKeyVersion(ctx, "life", 3); err != nil || !slices.Equal(k.DisabledVersions, []uint32{3}) {
		t.Fatalf("disable 3: %+v, %v", k, err)
	}
	if _, err := c.Encrypt(ctx, "life", []byte("x"), nil); !client.IsCode(err, api.CodeVersionDisabled) {
		t.Fatalf("encrypt with the latest disabled: %v", err)
	}
	if _, err := c.Decrypt(ctx, "life", v3.Ciphertext, nil); !client.IsCode(err, api.CodeVersionDisabled) {
		t.Fatalf("decrypt of version 3 disabled: %v", err)
	}
	if k, err = c.EnableKeyVersion(ctx, "life", 3); err != nil || k.DisabledVersions != nil {
		t.Fatalf("enable 3: %+v, %v", k, err)
	}
	if _, err := c.DisableKeyVersion(ctx, "life", 9); !errors.Is(err, client.ErrKeyNotFound) {
		t.Fatalf("disable a version the key never had: %v", err)
	}

	// Trimmed: refused until retired, then version 1 is gone.
	if _, err := c.TrimKey(ctx, "life", 2); !client.IsCode(err, api.CodeTrimAboveMinDecryption) {
		t.Fatalf("trim before retiring: %v", err)
	}
	if _, err := c.UpdateKeyConfig(ctx, "life", api.KeyConfigPatch{MinDecryptionVersion: api.Some[uint32](2)}); err != nil {
		t.Fatal(err)
	}
	if k, err = c.TrimKey(ctx, "life", 2); err != nil || k.MinAvailableVersion != 2 || len(k.Versions) != 2 || k.Versions[0].Version != 2 {
		t.Fatalf("trim: %+v, %v", k, err)
	}
	if _, err := c.Decrypt(ctx, "life", v1.Ciphertext, nil); !client.IsCode(err, api.CodeVersionDestroyed) {
		t.Fatalf("decrypt of the trimmed version: %v", err)
	}
	if pt, err := c.Decrypt(ctx, "life", v3.Ciphertext, nil); err != nil || string(pt) != "three" {
		t.Fatalf("decrypt of version 3 after the trim: %q, %v", pt, err)
	}

	// At once, where the server allows it.
	if k, err := c.ScheduleKeyDeletion(ctx, "life", 0); err != nil || k != nil {
		t.Fatalf("immediate deletion: %+v, %v", k, err)
	}
	if _, err := c.DescribeKey(ctx, "life"); !errors.Is(err, client.ErrKeyNotFound) {
		t.Fatalf("describe after the immediate deletion: %v", err)
	}
}

// Without allow_immediate_key_deletion, a wait of 0 is refused and the
// key stays.
func TestClientImmediateDeletionRefused(t *testing.T) {
	url, _ := startServer(t)
	c := newClient(t, url)
	ctx := context.Background()
	if _, err := c.CreateKey(ctx, "stays", api.CreateKeyRequest{KeyConfig: api.KeyConfig{DeletionAllowed: true}}); err != nil {
		t.Fatal(err)
	}
	_, err := c.ScheduleKeyDeletion(ctx, "stays", 0)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 403 || ce.Code() != api.CodeImmediateDeletionDisallowed {
		t.Fatalf("immediate deletion: %v", err)
	}
	if k, err := c.DescribeKey(ctx, "stays"); err != nil || k.Deletion != nil {
		t.Fatalf("the key after the refusal: %+v, %v", k, err)
	}
}
