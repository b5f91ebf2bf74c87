package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cipherd/cipherd/cryptosvc"
)

// Usage counts per key version (cryptosvc.UsageStore) live in
// cipherd_key_usage, one row per version used. Each replica's flush adds
// its own counts to the rows in one statement (sealed = sealed + delta),
// so the rows hold the sums of the whole fleet and every replica reads
// them as they are. The rows of a key go with it: Delete removes them, and
// Create removes what a key deleted under the same name left.

var _ cryptosvc.UsageStore = (*Store)(nil)

// addUsage adds the deltas of versions that exist, in (name, version)
// order: replicas flushing together lock rows in the same order, and so
// wait for each other instead of deadlocking. A delta whose version has
// no row in cipherd_key_versions (its key deleted or the version gone)
// joins nothing and is dropped.
const addUsage = `
INSERT INTO cipherd_key_usage AS u (name, version, sealed, opened, local_seal_keys, last_used)
SELECT d.name, d.version, d.sealed, d.opened, d.local_seal_keys, d.last_used
FROM unnest($1::text[], $2::integer[], $3::bigint[], $4::bigint[], $5::bigint[], $6::timestamptz[])
	AS d(name, version, sealed, opened, local_seal_keys, last_used)
JOIN cipherd_key_versions v ON v.name = d.name AND v.version = d.version
ORDER BY d.name, d.version
ON CONFLICT (name, version) DO UPDATE SET
	sealed = u.sealed + EXCLUDED.sealed,
	opened = u.opened + EXCLUDED.opened,
	local_seal_keys = u.local_seal_keys + EXCLUDED.local_seal_keys,
	last_used = greatest(u.last_used, EXCLUDED.last_used)`

// AddUsage adds the deltas to the counts of every replica, in one
// statement: all of them or none.
func (s *Store) AddUsage(ctx context.Context, deltas []cryptosvc.VersionUsage) error {
	if s.snap.Load() == nil {
		return cryptosvc.ErrClosed
	}
	if len(deltas) == 0 {
		return nil
	}
	n := len(deltas)
	var (
		names                         = make([]string, n)
		versions                      = make([]int32, n)
		sealed, opened, localSealKeys = make([]int64, n), make([]int64, n), make([]int64, n)
		lastUsed                      = make([]time.Time, n)
	)
	for i, d := range deltas {
		names[i], versions[i] = d.Key, int32(d.Version)
		sealed[i], opened[i], localSealKeys[i] = int64(d.Sealed), int64(d.Opened), int64(d.LocalSealKeys)
		lastUsed[i] = d.LastUsed
	}
	ctx, cancel := context.WithTimeout(ctx, s.opTO)
	defer cancel()
	_, err := s.pool.Exec(ctx, addUsage, names, versions, sealed, opened, localSealKeys, lastUsed)
	return classify(err)
}

// Usage reads the counts of key name's versions.
func (s *Store) Usage(ctx context.Context, name string) ([]cryptosvc.VersionUsage, error) {
	if s.snap.Load() == nil {
		return nil, cryptosvc.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, s.opTO)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
SELECT version, sealed, opened, local_seal_keys, last_used FROM cipherd_key_usage
WHERE name = $1 ORDER BY version`, name)
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	var out []cryptosvc.VersionUsage
	for rows.Next() {
		var (
			version                       int32
			sealed, opened, localSealKeys int64
			lastUsed                      *time.Time
		)
		if err := rows.Scan(&version, &sealed, &opened, &localSealKeys, &lastUsed); err != nil {
			return nil, classify(err)
		}
		u := cryptosvc.VersionUsage{Key: name, Version: uint32(version), Sealed: uint64(sealed), Opened: uint64(opened), LocalSealKeys: uint64(localSealKeys)}
		if lastUsed != nil {
			u.LastUsed = lastUsed.UTC()
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	return out, nil
}

// forgetUsage removes key name's counts, in a key's write transaction.
func forgetUsage(ctx context.Context, tx pgx.Tx, name string) error {
	_, err := tx.Exec(ctx, `DELETE FROM cipherd_key_usage WHERE name = $1`, name)
	return err
}
