package cryptosvc

import "context"

// A Keystore holds named keys with their material. Implementations: the file
// keystore (OpenFileStore, the embedded default), the read-only keyring file
// (OpenKeyring, for a mounted Kubernetes Secret), and MemStore (tests). An
// external KMS can implement it too.
//
// Implementations are safe for concurrent use. Get and List are on the hot
// path and should be served from memory. Returned keys are shared: callers
// must not modify them (Clone first).
type Keystore interface {
	// Get returns the key named name, or an error wrapping ErrKeyNotFound.
	Get(ctx context.Context, name string) (*StoredKey, error)
	// List returns the names of every key, sorted.
	List(ctx context.Context) ([]string, error)
	// Create stores a new key, or fails with ErrKeyExists.
	Create(ctx context.Context, k *StoredKey) error
	// Update replaces the key of the same name (a rotation or a new
	// configuration), or fails with ErrKeyNotFound.
	Update(ctx context.Context, k *StoredKey) error
	// Delete removes the key, or fails with ErrKeyNotFound.
	Delete(ctx context.Context, name string) error
	// Close releases the keystore's resources (locks, watchers).
	Close() error
}
