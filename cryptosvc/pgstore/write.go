package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/cipherd/cipherd/cryptosvc"
)

// Create writes a new key and its versions in one transaction.
func (s *Store) Create(ctx context.Context, k *cryptosvc.StoredKey) error {
	k, err := s.writable(k)
	if err != nil {
		return err
	}
	meta, err := s.sealMeta(k)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opTO)
	defer cancel()
	var rev int64
	err = s.tx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
INSERT INTO cipherd_keys AS k (name, revision, meta) VALUES ($1, nextval('cipherd_revision'), $2)
ON CONFLICT (name) DO UPDATE SET revision = EXCLUDED.revision, deleted = false, meta = EXCLUDED.meta
	WHERE k.deleted
RETURNING revision`, k.Name, meta).Scan(&rev)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %s", cryptosvc.ErrKeyExists, k.Name)
		}
		if err != nil {
			return err
		}
		// A key made under the name of one deleted before starts from zero.
		if err := forgetUsage(ctx, tx, k.Name); err != nil {
			return err
		}
		return s.insertVersions(ctx, tx, k, 0, rev)
	})
	if err != nil {
		return err
	}
	k.Revision = uint64(rev)
	s.apply(map[string]entry{k.Name: {key: k, rev: k.Revision}}, false, false)
	return nil
}

// Update writes a rotation or a new configuration if the key's revision in
// the database is still k.Revision.
func (s *Store) Update(ctx context.Context, k *cryptosvc.StoredKey) error {
	k, err := s.writable(k)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opTO)
	defer cancel()
	cur, err := s.current(ctx, k.Name, k.Revision)
	if err != nil {
		return err
	}
	if err := cryptosvc.CheckAppendOnly(cur, k); err != nil {
		return err
	}
	meta, err := s.sealMeta(k)
	if err != nil {
		return err
	}
	var rev int64
	err = s.tx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
UPDATE cipherd_keys SET revision = nextval('cipherd_revision'), meta = $3
WHERE name = $1 AND revision = $2 AND NOT deleted
RETURNING revision`, k.Name, int64(k.Revision), meta).Scan(&rev)
		if errors.Is(err, pgx.ErrNoRows) {
			return errLost
		}
		if err != nil {
			return err
		}
		if first, was := k.Versions[0].Version, cur.Versions[0].Version; first > was {
			// A trim (CheckAppendOnly allowed it): the rows of the
			// versions it destroys go in the same transaction.
			if _, err := tx.Exec(ctx, `DELETE FROM cipherd_key_versions WHERE name = $1 AND version < $2`, k.Name, int64(first)); err != nil {
				return err
			}
		}
		return s.insertVersions(ctx, tx, k, newVersions(cur, k), rev)
	})
	if errors.Is(err, errLost) {
		return s.lost(k.Name)
	}
	if err != nil {
		return err
	}
	k.Revision = uint64(rev)
	s.apply(map[string]entry{k.Name: {key: k, rev: k.Revision}}, false, false)
	return nil
}

// Delete removes the key's versions and turns its row into a tombstone, if
// its revision is still revision.
func (s *Store) Delete(ctx context.Context, name string, revision uint64) error {
	if s.snap.Load() == nil {
		return cryptosvc.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, s.opTO)
	defer cancel()
	if _, err := s.current(ctx, name, revision); err != nil {
		return err
	}
	var rev int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
UPDATE cipherd_keys SET revision = nextval('cipherd_revision'), deleted = true, meta = NULL
WHERE name = $1 AND revision = $2 AND NOT deleted
RETURNING revision`, name, int64(revision)).Scan(&rev)
		if errors.Is(err, pgx.ErrNoRows) {
			return errLost
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM cipherd_key_versions WHERE name = $1`, name); err != nil {
			return err
		}
		if err := forgetUsage(ctx, tx, name); err != nil {
			return err
		}
		return notify(ctx, tx, name, rev)
	})
	if errors.Is(err, errLost) {
		return s.lost(name)
	}
	if err != nil {
		return err
	}
	s.apply(map[string]entry{name: {rev: uint64(rev)}}, false, false)
	return nil
}

// writable validates and copies k for a write.
func (s *Store) writable(k *cryptosvc.StoredKey) (*cryptosvc.StoredKey, error) {
	if s.snap.Load() == nil {
		return nil, cryptosvc.ErrClosed
	}
	if k == nil {
		return nil, fmt.Errorf("%w: nil key", cryptosvc.ErrInvalidConfig)
	}
	if err := k.Validate(); err != nil {
		return nil, err
	}
	return k.Clone(), nil
}

// current returns the key at revision rev, from memory or, when memory
// holds another revision, from the database; ErrConflict if the key is at
// another revision there too.
func (s *Store) current(ctx context.Context, name string, rev uint64) (*cryptosvc.StoredKey, error) {
	if snap := s.snap.Load(); snap != nil {
		if e := snap.keys[name]; e.key != nil && e.rev == rev {
			return e.key, nil
		}
	}
	if err := s.reload(ctx, name, true); err != nil {
		return nil, err
	}
	snap := s.snap.Load()
	if snap == nil {
		return nil, cryptosvc.ErrClosed
	}
	e := snap.keys[name]
	switch {
	case e.key == nil:
		return nil, notFound(name)
	case e.rev != rev:
		return nil, fmt.Errorf("%w: %s", cryptosvc.ErrConflict, name)
	}
	return e.key, nil
}

// errLost: a conditional write matched no row; the transaction is rolled
// back and its connection returned before lost runs.
var errLost = errors.New("pgstore: the row changed")

// lost explains a conditional write that matched no row: it reloads the
// key, so that the caller's next Get sees the winner, and returns
// ErrKeyNotFound or ErrConflict.
func (s *Store) lost(name string) error {
	ctx, cancel := context.WithTimeout(s.ctx, s.opTO)
	defer cancel()
	if err := s.reload(ctx, name, true); err != nil {
		return err
	}
	if k, err := s.Get(ctx, name); err != nil || k == nil {
		return notFound(name)
	}
	return fmt.Errorf("%w: %s", cryptosvc.ErrConflict, name)
}

// newVersions returns the index in next.Versions of its first version
// that cur does not have: those after cur's latest.
func newVersions(cur, next *cryptosvc.StoredKey) int {
	latest := cur.Latest().Version
	for i := range next.Versions {
		if next.Versions[i].Version > latest {
			return i
		}
	}
	return len(next.Versions)
}

// insertVersions seals and inserts k's versions from index from on, then
// queues the notification of revision rev.
func (s *Store) insertVersions(ctx context.Context, tx pgx.Tx, k *cryptosvc.StoredKey, from int, rev int64) error {
	var nums []int32
	var sealed [][]byte
	for i := from; i < len(k.Versions); i++ {
		b, err := s.sealVersion(k.Name, &k.Versions[i])
		if err != nil {
			return err
		}
		nums = append(nums, int32(k.Versions[i].Version))
		sealed = append(sealed, b)
	}
	if len(nums) > 0 {
		if _, err := tx.Exec(ctx, `
INSERT INTO cipherd_key_versions (name, version, sealed)
SELECT $1, v, s FROM unnest($2::integer[], $3::bytea[]) AS t(v, s)`, k.Name, nums, sealed); err != nil {
			return err
		}
	}
	return notify(ctx, tx, k.Name, rev)
}

// notify queues the change's notification; PostgreSQL delivers it at
// commit, to every listener, and not at all if the transaction aborts.
func notify(ctx context.Context, tx pgx.Tx, name string, rev int64) error {
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, strconv.FormatInt(rev, 10)+" "+name)
	return err
}

// tx runs fn in a transaction and commits it. Errors from the database
// are classified; fn's own (ErrKeyExists, ErrConflict, …) pass as they are.
func (s *Store) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return classify(err)
	}
	defer tx.Rollback(context.Background())
	if err := fn(tx); err != nil {
		if isOurs(err) {
			return err
		}
		return classify(err)
	}
	return classify(tx.Commit(ctx))
}

func isOurs(err error) bool {
	for _, e := range []error{errLost, cryptosvc.ErrKeyExists, cryptosvc.ErrKeyNotFound, cryptosvc.ErrConflict, cryptosvc.ErrInvalidConfig, cryptosvc.ErrUnavailable, cryptosvc.ErrTokenExists} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
