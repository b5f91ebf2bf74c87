// Package pgstore is a cryptosvc.Keystore on PostgreSQL, shared by every
// replica of a cipherd fleet: keys are created, rotated, configured and
// deleted through the API of any replica, and every other replica learns of
// the change within milliseconds.
//
// # Design
//
//   - Served from memory. Every key is loaded at Open; Get and List never
//     touch the database, so the data path costs what it costs with the file
//     store, and encryption and decryption with known keys go on while the
//     database is down.
//   - Pushed changes. Every write commits a NOTIFY on the channel
//     cipherd_keys in the same transaction; each store LISTENs on its own
//     connection and reloads the keys named. After a lost connection it
//     reconnects with backoff, LISTENs again and reloads every key whose
//     revision moved, so nothing written meanwhile is missed.
//   - Read on miss. Refresh reads one key from the database; the Service
//     calls it when a ciphertext names a version, or a request a key, that
//     memory does not have yet, so a version or a key made on another
//     replica serves here even before its notification arrives. Concurrent
//     refreshes of one name share one query. Names memory holds no key of
//     are read in batches at a bounded pace and a name found absent is
//     remembered for a second (unknown.go), so that requests for random
//     names cost the database a few queries a second.
//   - Optimistic writes. A key's row carries a revision drawn from one
//     sequence; Update and Delete are conditional on it (UPDATE … WHERE
//     revision = $old) and version rows have the primary key (name,
//     version), so no two writers on any replicas can both make version
//     n, and a transaction either writes a whole rotation or nothing.
//   - Sealed at rest. Each version's secret and each key's metadata are
//     records sealed by a cryptosvc.Sealer under the database's storage
//     key, the key name (and version) bound in the additional data; the
//     storage key is kept wrapped by the root-key provider, so a wrong root
//     key is refused at Open. The database never holds material in clear.
//   - Service tokens (cryptosvc.TokenStore). One row each in
//     cipherd_tokens, hashed; every replica keeps them in memory and learns
//     of new and revoked ones by notification (tokens.go).
//   - Versioned schema. Open creates or migrates the schema under an
//     advisory lock, so that replicas starting together migrate once; a
//     schema newer than this build is refused.
//
// docs/STORAGE.md specifies the tables and records; docs/OPERATIONS.md
// covers configuration, outages, back-up and restore.
package pgstore
