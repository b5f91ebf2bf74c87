package cryptosvc

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// A Keystore holds named keys with their material. Implementations: the file
// keystore (OpenFileStore, the embedded default), the read-only keyring file
// (OpenKeyring, for a mounted Kubernetes Secret), MemStore (tests), and the
// PostgreSQL store (package cryptosvc/pgstore) that several replicas share.
// An external KMS can implement it too.
//
// Implementations are safe for concurrent use. Get and List are on the hot
// path and should be served from memory. Returned keys are shared: callers
// must not modify them (Clone first).
//
// Writes are optimistic: every stored key carries a Revision, which changes
// with every write and never repeats within a store, and Update and Delete
// apply only if the key's revision is still the one the caller read. A
// caller that loses the race gets ErrConflict, reads the key again and
// retries (Service does), so two writers, in one process or in several
// sharing a database, can never both turn version 4 into a version 5.
type Keystore interface {
	// Get returns the key named name, or an error wrapping ErrKeyNotFound.
	Get(ctx context.Context, name string) (*StoredKey, error)
	// List returns the names of every key, sorted.
	List(ctx context.Context) ([]string, error)
	// Refresh returns the key named name as the backing store holds it
	// now, reading through the memory that serves Get. A replica calls it
	// when a ciphertext names a version, or a request a key, that Get does
	// not have yet. Stores that no other process writes return what Get
	// returns; shared ones bound what misses of unknown names cost.
	//
	// enough, when not nil, says what the caller missed: if memory holds
	// a key of that name for which enough returns true, Refresh returns
	// it without a read. Memory may have gained it between the caller's
	// Get and this call (a read another caller started, a notification),
	// and a read for it would be one more query per concurrent caller.
	Refresh(ctx context.Context, name string, enough func(*StoredKey) bool) (*StoredKey, error)
	// Create stores a new key, or fails with ErrKeyExists. k.Revision is
	// ignored: the store assigns the first revision.
	Create(ctx context.Context, k *StoredKey) error
	// Update replaces the key of the same name (a rotation, a new
	// configuration, a trim) if its revision is still k.Revision, giving it
	// a new revision. It fails with ErrKeyNotFound if there is no such key,
	// with ErrConflict if the revision differs (Get then returns a key at
	// least as new as the one that won), and with ErrInvalidConfig if k
	// drops a version or changes one: versions are append-only, but for a
	// trim, which drops those below k.MinAvailable (CheckAppendOnly).
	Update(ctx context.Context, k *StoredKey) error
	// Delete removes the key if its revision is still revision, or fails
	// with ErrKeyNotFound or ErrConflict as Update does.
	Delete(ctx context.Context, name string, revision uint64) error
	// Watch calls fn with a key's name after every change to that key
	// (create, update, delete), made by this process or by any other
	// sharing the store, once the change is visible to Get. Calls may be
	// coalesced and come from the store's own goroutines; fn must not
	// block. stop ends the calls; Close ends them all.
	Watch(fn func(name string)) (stop func())
	// Close releases the keystore's resources (locks, watchers,
	// connections).
	Close() error
}

// KeyWatchers is the list of Watch callbacks of a Keystore, for
// implementations outside this package. Its zero value is empty and ready.
type KeyWatchers struct {
	mu     sync.Mutex
	next   int
	fns    map[int]func(string)
	closed bool
}

// Add registers fn and returns the function that removes it.
func (w *KeyWatchers) Add(fn func(name string)) (stop func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return func() {}
	}
	if w.fns == nil {
		w.fns = make(map[int]func(string))
	}
	id := w.next
	w.next++
	w.fns[id] = fn
	return func() {
		w.mu.Lock()
		delete(w.fns, id)
		w.mu.Unlock()
	}
}

// Notify calls every registered function with name. Callers must hold no
// lock that a callback might take.
func (w *KeyWatchers) Notify(name string) {
	w.mu.Lock()
	fns := make([]func(string), 0, len(w.fns))
	for _, fn := range w.fns {
		fns = append(fns, fn)
	}
	w.mu.Unlock()
	for _, fn := range fns {
		fn(name)
	}
}

// Close removes every function; later Add calls register nothing.
func (w *KeyWatchers) Close() {
	w.mu.Lock()
	w.closed = true
	w.fns = nil
	w.mu.Unlock()
}

// CheckAppendOnly reports whether next may replace cur: the same name,
// every version of cur kept unchanged (number, time and material) and new
// ones only added after it. Stores call it from Update.
//
// The one exception is a trim, which says so: next may drop the versions
// below its MinAvailable when that is above cur's, but not cur's latest
// version, and destroyed versions never come back. A version missing
// without it is refused, whatever its number.
func CheckAppendOnly(cur, next *StoredKey) error {
	if next.MinAvailable < cur.MinAvailable {
		return fmt.Errorf("%w: key %s: an update cannot lower min_available_version (%d stored, %d given)", ErrInvalidConfig, cur.Name, cur.MinAvailable, next.MinAvailable)
	}
	drop := next.firstVersion() // versions below it are trimmed
	if latest := cur.Latest(); latest != nil && drop > latest.Version {
		return fmt.Errorf("%w: key %s: a trim cannot destroy the latest version %d", ErrInvalidConfig, cur.Name, latest.Version)
	}
	for i := range cur.Versions {
		c := &cur.Versions[i]
		if c.Version < drop {
			continue
		}
		n := next.Version(c.Version)
		if n == nil {
			return fmt.Errorf("%w: key %s: an update cannot remove version %d (a trim removes those below min_available_version only)", ErrInvalidConfig, cur.Name, c.Version)
		}
		if !c.Created.Equal(n.Created) || !c.Secret.Equal(&n.Secret) {
			return fmt.Errorf("%w: key %s: an update cannot change version %d", ErrInvalidConfig, cur.Name, c.Version)
		}
	}
	return nil
}

// A HealthReporter is a Keystore whose backing store can become
// unreachable (a database): Health returns nil while it is reachable, else
// an error wrapping ErrUnavailable. The keys in memory serve data
// meanwhile; /readyz reports it.
type HealthReporter interface {
	Health() error
}

// A SyncReporter is a Keystore whose memory follows a backing store that
// others change (a database other replicas write, a keyring file replaced
// from outside): LastSync returns when memory was last known to hold what
// the backing store holds, by a successful read, notification or check of
// it. The time since then is how stale memory may be. Stores that only
// their own process writes (the file keystore, MemStore) are always in
// sync and do not implement it.
type SyncReporter interface {
	LastSync() time.Time
}
