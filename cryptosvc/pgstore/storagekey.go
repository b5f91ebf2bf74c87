package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cipherd/cipherd/cryptosvc"
)

// The storage key is the row cipherd_meta('storage_key'), the JSON object
// the file store keeps in storagekey.json:
// {"v":2,"generation":1,"root_key":"static","wrapped":"<base64>"}.
const storageKeyRow = "storage_key"

type storageKeyRecord struct {
	V int `json:"v"`
	cryptosvc.WrappedStorageKey
}

// openStorageKey unwraps the database's storage key with p, first making
// it if the database has none (the first replica to insert wins; the
// others unwrap the winner's).
func openStorageKey(ctx context.Context, pool *pgxpool.Pool, p cryptosvc.RootKeyProvider, r io.Reader) (*cryptosvc.Sealer, error) {
	for range 2 {
		var data []byte
		err := pool.QueryRow(ctx, `SELECT value FROM cipherd_meta WHERE name = $1`, storageKeyRow).Scan(&data)
		if errors.Is(err, pgx.ErrNoRows) {
			_, w, err := cryptosvc.NewStorageKey(ctx, p, 1, r)
			if err != nil {
				return nil, err
			}
			b, err := json.Marshal(&storageKeyRecord{V: 2, WrappedStorageKey: *w})
			if err != nil {
				return nil, err
			}
			if _, err := pool.Exec(ctx, `INSERT INTO cipherd_meta (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, storageKeyRow, b); err != nil {
				return nil, classify(err)
			}
			continue
		}
		if err != nil {
			return nil, classify(err)
		}
		rec, err := decodeStorageKey(data)
		if err != nil {
			return nil, err
		}
		s, err := cryptosvc.OpenStorageKey(ctx, p, &rec.WrappedStorageKey, r)
		if err != nil {
			return nil, fmt.Errorf("pgstore: %w", err)
		}
		return s, nil
	}
	return nil, errors.New("pgstore: the storage key row vanished")
}

// decodeStorageKey decodes the storage key row's value.
func decodeStorageKey(data []byte) (*storageKeyRecord, error) {
	var rec storageKeyRecord
	if err := strictJSON(data, &rec); err != nil || rec.V != 2 {
		return nil, fmt.Errorf("pgstore: the storage key row: %w", cryptosvc.ErrMalformed)
	}
	return &rec, nil
}

// AuditKey returns the audit key derived from the database's storage key
// (cryptosvc.AuditKeySource): the same on every replica.
func (s *Store) AuditKey() ([]byte, uint32, error) { return s.sealer.AuditKey() }
