package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cipherd/cipherd/cryptosvc"
)

// RotateRootKey moves the database at dsn from root key from to root key
// to: it re-wraps the database's storage key under to, in one transaction
// that either commits the new wrapping or leaves the old one, so a process
// killed at any point leaves a database that opens with one of the two.
// Nothing else is written: the version rows stay sealed under the same
// storage key, so replicas that are running keep serving and writing
// without a restart, and each needs to root key at its next start.
//
// It is idempotent: a storage key that to already unwraps is left as it
// is (rotated reports false). The new wrapping is unwrapped with to before
// it commits, so a provider that wraps what it cannot unwrap changes
// nothing.
func RotateRootKey(ctx context.Context, dsn string, from, to cryptosvc.RootKeyProvider) (w *cryptosvc.WrappedStorageKey, rotated bool, err error) {
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, false, fmt.Errorf("pgstore: the connection string does not parse: %w", err)
	}
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = defaultConnectTimeout
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, false, classify(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, false, classify(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var data []byte
	err = tx.QueryRow(ctx, `SELECT value FROM cipherd_meta WHERE name = $1 FOR UPDATE`, storageKeyRow).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) || isUndefinedTable(err) {
		return nil, false, fmt.Errorf("pgstore: the database holds no cipherd keystore (no storage key): start cipherd on it first")
	}
	if err != nil {
		return nil, false, classify(err)
	}
	rec, err := decodeStorageKey(data)
	if err != nil {
		return nil, false, err
	}
	if _, err := cryptosvc.OpenStorageKey(ctx, to, &rec.WrappedStorageKey, nil); err == nil {
		return &rec.WrappedStorageKey, false, nil
	} else if !errors.Is(err, cryptosvc.ErrRootKey) {
		return nil, false, fmt.Errorf("pgstore: the new root key: %w", err)
	}
	if from == nil {
		return nil, false, fmt.Errorf("%w: no current root key to unwrap the storage key with", cryptosvc.ErrRootKey)
	}
	s, err := cryptosvc.OpenStorageKey(ctx, from, &rec.WrappedStorageKey, nil)
	if err != nil {
		return nil, false, fmt.Errorf("pgstore: the current root key: %w", err)
	}
	nw, err := s.WrapFor(ctx, to, rec.Generation)
	if err != nil {
		return nil, false, fmt.Errorf("pgstore: %w", err)
	}
	if _, err := cryptosvc.OpenStorageKey(ctx, to, nw, nil); err != nil {
		return nil, false, fmt.Errorf("pgstore: the new root key does not unwrap what it wrapped: %w", err)
	}
	b, err := json.Marshal(&storageKeyRecord{V: 2, WrappedStorageKey: *nw})
	if err != nil {
		return nil, false, err
	}
	if _, err := tx.Exec(ctx, `UPDATE cipherd_meta SET value = $2 WHERE name = $1`, storageKeyRow, b); err != nil {
		return nil, false, classify(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, false, classify(err)
	}
	return nw, true, nil
}
