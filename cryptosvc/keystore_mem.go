package cryptosvc

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// MemStore is a Keystore held in memory only, for tests and for programs
// that manage keys themselves. Its zero value is not usable: use NewMemStore.
//
// Create and Update store a deep copy of their argument, so the caller may
// reuse or modify it afterwards. Get returns the stored key itself, shared
// with every other caller: it must not be modified (Clone first).
type MemStore struct {
	keySet
	usage memUsage // usage counts (usage_file.go)
}

// keySet is the in-memory set of keys behind MemStore and FileStore, which
// serve Get and List from it alike.
type keySet struct {
	mu     sync.RWMutex // guards keys, rev and closed
	keys   map[string]*StoredKey
	rev    uint64 // the last revision given out
	closed bool

	watch  KeyWatchers
	tokens TokenSet // service tokens (TokenStore); the file store writes them first
}

// Refresh returns what Get returns: no other process writes this store.
func (s *keySet) Refresh(ctx context.Context, name string, _ func(*StoredKey) bool) (*StoredKey, error) {
	return s.Get(ctx, name)
}

// Watch calls fn after every change (see Keystore).
func (s *keySet) Watch(fn func(name string)) (stop func()) { return s.watch.Add(fn) }

// checkUpdate checks, under mu (FileStore: wmu), that k may replace the stored key of its
// name, and gives k its new revision.
func (s *keySet) checkUpdate(k *StoredKey) error {
	cur, ok := s.keys[k.Name]
	if !ok {
		return ksNotFound(k.Name)
	}
	if cur.Revision != k.Revision {
		return ksConflict(k.Name)
	}
	if err := CheckAppendOnly(cur, k); err != nil {
		return err
	}
	s.rev++
	k.Revision = s.rev
	return nil
}

// checkDelete checks, under mu (FileStore: wmu), that the key may be deleted.
func (s *keySet) checkDelete(name string, revision uint64) error {
	cur, ok := s.keys[name]
	if !ok {
		return ksNotFound(name)
	}
	if cur.Revision != revision {
		return ksConflict(name)
	}
	return nil
}

// Get returns the key named name (shared: do not modify it).
func (s *keySet) Get(_ context.Context, name string) (*StoredKey, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	k, ok := s.keys[name]
	if !ok {
		return nil, ksNotFound(name)
	}
	return k, nil
}

// List returns the names of every key, sorted.
func (s *keySet) List(_ context.Context) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	return ksSortedNames(s.keys), nil
}

var _ Keystore = (*MemStore)(nil)

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{keySet: keySet{keys: make(map[string]*StoredKey)}} }

// Create stores a copy of k.
func (s *MemStore) Create(_ context.Context, k *StoredKey) error {
	k, err := ksValidClone(k)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if _, ok := s.keys[k.Name]; ok {
		s.mu.Unlock()
		return ksExists(k.Name)
	}
	s.rev++
	k.Revision = s.rev
	s.keys[k.Name] = k
	s.usage.forget(k.Name) // a key made under the name of one deleted before starts from zero
	s.mu.Unlock()
	s.watch.Notify(k.Name)
	return nil
}

// Update replaces the key of k's name with a copy of k.
func (s *MemStore) Update(_ context.Context, k *StoredKey) error {
	k, err := ksValidClone(k)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if err := s.checkUpdate(k); err != nil {
		s.mu.Unlock()
		return err
	}
	s.keys[k.Name] = k
	s.mu.Unlock()
	s.watch.Notify(k.Name)
	return nil
}

// Delete removes the key named name if its revision is revision.
func (s *MemStore) Delete(_ context.Context, name string, revision uint64) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if err := s.checkDelete(name, revision); err != nil {
		s.mu.Unlock()
		return err
	}
	delete(s.keys, name)
	s.mu.Unlock()
	s.watch.Notify(name)
	return nil
}

// Close drops the keys; later calls fail with ErrClosed. Closing twice is
// not an error.
func (s *MemStore) Close() error {
	s.watch.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.keys = nil
	return nil
}

// Helpers shared by the keystores.

// ksValidClone validates k and returns a deep copy of it, so that a
// keystore never shares memory with its caller's argument.
func ksValidClone(k *StoredKey) (*StoredKey, error) {
	if k == nil {
		return nil, fmt.Errorf("%w: nil key", ErrInvalidConfig)
	}
	if err := k.Validate(); err != nil {
		return nil, err
	}
	return k.Clone(), nil
}

// ksNotFound and ksExists name the key: names are validated or looked up
// verbatim, never material. A name that fails validation is not echoed.
func ksNotFound(name string) error {
	if ValidateKeyName(name) != nil {
		return ErrKeyNotFound
	}
	return fmt.Errorf("%w: %s", ErrKeyNotFound, name)
}

func ksExists(name string) error { return fmt.Errorf("%w: %s", ErrKeyExists, name) }

func ksConflict(name string) error { return fmt.Errorf("%w: %s", ErrConflict, name) }

func ksSortedNames(m map[string]*StoredKey) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
