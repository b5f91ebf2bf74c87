package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cipherd/cipherd/api"
)

// The key lifecycle (docs/API.md, Key lifecycle): a deletion scheduled
// ahead and cancelled, versions disabled and enabled, retired versions
// destroyed. Each returns the key as the service describes it after the
// change.

// ScheduleKeyDeletion schedules the deletion of a key whose configuration
// allows it, wait from now, and returns the key with its Deletion. The
// wait must be at least the service's key_deletion_min_wait (else
// api.CodeInvalidDeletionWait); a negative wait means the service's
// default. A wait of 0 deletes the key at once, where the service allows
// it (else api.CodeImmediateDeletionDisallowed), and returns a nil key.
func (c *Client) ScheduleKeyDeletion(ctx context.Context, name string, wait time.Duration) (*api.Key, error) {
	if err := checkKey(name); err != nil {
		return nil, err
	}
	u := c.url(api.RouteKey, name)
	if wait >= 0 {
		u += "?wait=" + wait.String()
	}
	if wait == 0 {
		return nil, c.do(ctx, http.MethodDelete, u, nil, nil) // 204, no body
	}
	var k api.Key
	if err := c.do(ctx, http.MethodDelete, u, nil, &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// CancelKeyDeletion cancels a key's scheduled deletion: the key serves
// again, every version intact. A key whose deletion is not scheduled is
// api.CodeKeyNotPendingDeletion.
func (c *Client) CancelKeyDeletion(ctx context.Context, name string) (*api.Key, error) {
	return c.keyCall(ctx, http.MethodPost, api.RouteKeyCancelDeletion, name, nil)
}

// DisableKeyVersion disables version v of a key: it neither seals nor
// opens (api.CodeVersionDisabled) until EnableKeyVersion.
func (c *Client) DisableKeyVersion(ctx context.Context, name string, v uint32) (*api.Key, error) {
	return c.versionCall(ctx, api.RouteKeyVersionDisable, name, v)
}

// EnableKeyVersion enables version v of a key again.
func (c *Client) EnableKeyVersion(ctx context.Context, name string, v uint32) (*api.Key, error) {
	return c.versionCall(ctx, api.RouteKeyVersionEnable, name, v)
}

func (c *Client) versionCall(ctx context.Context, route, name string, v uint32) (*api.Key, error) {
	if err := checkKey(name); err != nil {
		return nil, err
	}
	u := c.url(strings.Replace(route, ":version", strconv.FormatUint(uint64(v), 10), 1), name)
	var k api.Key
	if err := c.do(ctx, http.MethodPost, u, nil, &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// TrimKey destroys the key's versions below minAvailable, for good; they
// must be retired (minAvailable at most the key's min_decryption_version,
// else api.CodeTrimAboveMinDecryption). It sends the key's name as the
// confirmation the service asks for.
func (c *Client) TrimKey(ctx context.Context, name string, minAvailable uint32) (*api.Key, error) {
	return c.keyCall(ctx, http.MethodPost, api.RouteKeyTrim, name, &api.TrimKeyRequest{MinAvailableVersion: minAvailable, Confirm: name})
}

// BackupKey returns a backup of a key created exportable, with its
// material, sealed under under: api.SealedUnderBackupKey (the service's
// backup key), api.SealedUnderRoot (its keystore's root key), or "" for
// the service's default. The caller needs the operation keys-backup. A
// key not created exportable is api.CodeKeyNotExportable. The backup
// holds the key's material: keep it as the key itself is kept.
func (c *Client) BackupKey(ctx context.Context, name, under string) (*api.KeyBackup, error) {
	if err := checkKey(name); err != nil {
		return nil, err
	}
	u := c.url(api.RouteKeyBackup, name)
	if under != "" {
		u += "?under=" + url.QueryEscape(under)
	}
	var b api.KeyBackup
	if err := c.do(ctx, http.MethodPost, u, nil, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// RestoreKey creates a key from a backup (api.KeyBackup.Backup), under
// name, or under the name the backup holds when name is empty. A key of
// that name is api.CodeKeyExists; a backup that does not open there is
// api.CodeInvalidBackup.
func (c *Client) RestoreKey(ctx context.Context, backup []byte, name string) (*api.Key, error) {
	if name == "" {
		var err error
		if name, err = api.BackupKeyName(backup); err != nil {
			return nil, err
		}
	}
	return c.keyCall(ctx, http.MethodPost, api.RouteKeyRestore, name, &api.RestoreKeyRequest{Backup: backup})
}
