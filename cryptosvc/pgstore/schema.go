package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The schema, one migration per version. A deleted key keeps its row as a
// tombstone (deleted, meta NULL, no versions) so that its revision, and the
// order of writes to the name, survive the delete.
var migrations = []string{
	1: `
CREATE SEQUENCE cipherd_revision;
CREATE TABLE cipherd_keys (
	name     text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$'),
	revision bigint NOT NULL,
	deleted  boolean NOT NULL DEFAULT false,
	meta     bytea CHECK (deleted = (meta IS NULL))
);
CREATE TABLE cipherd_key_versions (
	name    text NOT NULL REFERENCES cipherd_keys (name),
	version integer NOT NULL CHECK (version > 0),
	sealed  bytea NOT NULL,
	PRIMARY KEY (name, version)
);
CREATE TABLE cipherd_meta (
	name  text PRIMARY KEY,
	value bytea NOT NULL
);`,
	// Service tokens (cryptosvc.TokenStore): hashes, never secrets. A
	// revoked token's row is deleted; replicas learn of it by notification.
	2: `
CREATE TABLE cipherd_tokens (
	id       text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{16}$'),
	sha256   bytea NOT NULL CHECK (length(sha256) = 32),
	name     text NOT NULL,
	policies text[] NOT NULL,
	created  timestamptz NOT NULL,
	expires  timestamptz NOT NULL CHECK (expires > created)
);`,
	// Usage counts per key version (cryptosvc.UsageStore), which every
	// replica adds its own counts to (usage.go). No foreign key: a row
	// may outlive its version, and is removed with its key.
	3: `
CREATE TABLE cipherd_key_usage (
	name            text NOT NULL,
	version         integer NOT NULL CHECK (version > 0),
	sealed          bigint NOT NULL DEFAULT 0 CHECK (sealed >= 0),
	opened          bigint NOT NULL DEFAULT 0 CHECK (opened >= 0),
	local_seal_keys bigint NOT NULL DEFAULT 0 CHECK (local_seal_keys >= 0),
	last_used       timestamptz,
	PRIMARY KEY (name, version)
);`,
	// Each replica's host report (cryptosvc.FleetStore), replaced by its
	// replica at every report (fleet.go).
	4: `
CREATE TABLE cipherd_hosts (
	replica  text PRIMARY KEY,
	report   jsonb NOT NULL,
	reported timestamptz NOT NULL
);`,
}

// SchemaVersion is the schema version this build writes.
const SchemaVersion = 4

// schemaLock is the advisory lock key that serialises migrations.
const schemaLock = 0x63697068 // "ciph"

// migrate brings the schema to SchemaVersion.
func migrate(ctx context.Context, conn interface {
	Begin(context.Context) (pgx.Tx, error)
}) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(schemaLock)); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS cipherd_schema (version integer NOT NULL)`); err != nil {
		return err
	}
	var v int
	err = tx.QueryRow(ctx, `SELECT version FROM cipherd_schema`).Scan(&v)
	switch {
	case err == pgx.ErrNoRows:
		if _, err := tx.Exec(ctx, `INSERT INTO cipherd_schema (version) VALUES (0)`); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if v > SchemaVersion {
		return fmt.Errorf("pgstore: the database's schema is version %d, newer than this build's %d: upgrade cipherd", v, SchemaVersion)
	}
	for next := v + 1; next <= SchemaVersion; next++ {
		if _, err := tx.Exec(ctx, migrations[next]); err != nil {
			return fmt.Errorf("pgstore: migrating the schema to version %d: %w", next, err)
		}
	}
	if v < SchemaVersion {
		if _, err := tx.Exec(ctx, `UPDATE cipherd_schema SET version = $1`, SchemaVersion); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}
