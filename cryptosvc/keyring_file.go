package cryptosvc

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// The keyring file is a read-only Keystore in one JSON file, typically a
// Kubernetes Secret mounted into every replica. Its format, version 1:
//
//	{
//	  "cipherd_keyring": 1,
//	  "keys": [
//	    {
//	      "name": "orders",                      // ValidateKeyName
//	      "created": "2025-01-02T15:04:05Z",     // RFC 3339
//	      "config": {                            // KeyConfig's JSON; may be omitted
//	        "min_decryption_version": 0,
//	        "deletion_allowed": false
//	      },
//	      "versions": [                          // 1, 2, 3… in order
//	        {"version": 1, "created": "2025-01-02T15:04:05Z",
//	         "secret": "<standard base64 of 32 bytes>"}
//	      ]
//	    }
//	  ]
//	}
//
// A reader MUST reject: a "cipherd_keyring" other than 1, any field not
// shown above (at any depth), bytes after the object, a key that fails
// StoredKey.Validate (bad name, versions not 1…n, bad config), a secret that
// is not 32 bytes, and two keys of the same name. One bad key rejects the
// whole file: a keyring is replaced whole or not at all.
//
// Version 2 is the same keys sealed under a root key (keyring_sealed.go).
//
// The file store seals the same per-key record ("name", "created", "config",
// "versions") as the plaintext of its key files.

// KeyringConfig configures OpenKeyring.
type KeyringConfig struct {
	// PollInterval is how often the file is checked for a change (os.Stat,
	// following symlinks, then the SHA-256 of its content). 0 means 2s; a
	// negative value never polls: only Reload reloads.
	PollInterval time.Duration
	// Logger receives reloads (Info) and rejected files (Error), never key
	// material. nil means no logging.
	Logger *zap.Logger
	// RootKeyProvider opens a sealed keyring (keyring_sealed.go), at every
	// load. nil means only keyrings of version 1, in the clear, load.
	RootKeyProvider RootKeyProvider
}

const (
	krDefaultPoll = 2 * time.Second
	// krMaxFileSize bounds a keyring file (a Kubernetes Secret is at most
	// 1 MiB).
	krMaxFileSize = 16 << 20
	// krRacyWindow: a file modified this recently is re-hashed even when
	// os.Stat looks unchanged, because file systems keep coarse timestamps.
	krRacyWindow = 3 * time.Second
)

// Keyring is a read-only Keystore backed by a keyring file (format above).
// It reloads when the file changes: a valid new file replaces the whole key
// set atomically, an invalid one is logged, reported by LastError, and
// leaves the previous set in service. Create, Update and Delete return
// ErrReadOnly. Keys returned by Get are shared: do not modify them.
type Keyring struct {
	path     string
	log      *zap.Logger
	provider RootKeyProvider

	set    atomic.Pointer[krSet] // nil only after Close
	closed atomic.Bool

	// reloadMu serializes loads and guards the fields below it.
	reloadMu sync.Mutex
	lastStat os.FileInfo // at the last read
	lastSeen [sha256.Size]byte

	errMu   sync.Mutex
	lastErr error

	synced atomic.Int64 // Unix nanoseconds of the last check that found the file loaded (LastSync)

	rev   uint64 // the last revision given out; guarded by reloadMu
	watch KeyWatchers

	closeOnce sync.Once
	stop      chan struct{}
	done      chan struct{} // nil when not polling
}

var (
	_ Keystore     = (*Keyring)(nil)
	_ SyncReporter = (*Keyring)(nil)
)

// krSet is one loaded keyring; it is never modified after it is published.
type krSet struct {
	keys  map[string]*StoredKey
	names []string // sorted
	sum   [sha256.Size]byte
}

// OpenKeyring loads the keyring file at path, which must exist and be
// valid, and starts polling it for changes (see KeyringConfig).
func OpenKeyring(path string, cfg KeyringConfig) (*Keyring, error) {
	r := &Keyring{path: path, log: cfg.Logger, provider: cfg.RootKeyProvider, stop: make(chan struct{})}
	if r.log == nil {
		r.log = zap.NewNop()
	}
	if err := r.krLoad(true); err != nil {
		return nil, err
	}
	r.checked()
	interval := cfg.PollInterval
	if interval == 0 {
		interval = krDefaultPoll
	}
	if interval > 0 {
		r.done = make(chan struct{})
		go r.krPoll(interval)
	}
	return r, nil
}

// LastSync returns when the file was last checked and found to be the
// keyring in service: at open, at a Reload or poll that succeeded. While
// the file is missing or does not load, it stays where it was.
func (r *Keyring) LastSync() time.Time { return time.Unix(0, r.synced.Load()) }

// checked records a check of the file, if it left no error.
func (r *Keyring) checked() {
	if r.LastError() == nil {
		r.synced.Store(time.Now().UnixNano())
	}
}

// Get returns the key named name (shared: do not modify it).
func (r *Keyring) Get(_ context.Context, name string) (*StoredKey, error) {
	set := r.set.Load()
	if set == nil || r.closed.Load() {
		return nil, ErrClosed
	}
	k, ok := set.keys[name]
	if !ok {
		return nil, ksNotFound(name)
	}
	return k, nil
}

// List returns the names of every key, sorted.
func (r *Keyring) List(_ context.Context) ([]string, error) {
	set := r.set.Load()
	if set == nil || r.closed.Load() {
		return nil, ErrClosed
	}
	return slices.Clone(set.names), nil
}

// Create returns ErrReadOnly.
func (r *Keyring) Create(context.Context, *StoredKey) error { return ErrReadOnly }

// Update returns ErrReadOnly.
func (r *Keyring) Update(context.Context, *StoredKey) error { return ErrReadOnly }

// Delete returns ErrReadOnly.
func (r *Keyring) Delete(context.Context, string, uint64) error { return ErrReadOnly }

// Refresh returns what Get returns: the file is the only source.
func (r *Keyring) Refresh(ctx context.Context, name string, _ func(*StoredKey) bool) (*StoredKey, error) {
	return r.Get(ctx, name)
}

// Watch calls fn with the name of every key a reload adds, changes or
// removes.
func (r *Keyring) Watch(fn func(name string)) (stop func()) { return r.watch.Add(fn) }

// Reload reads the file now. If it is valid it replaces the key set; if it
// is not, the previous set stays and the error is returned (and reported by
// LastError until a later load succeeds).
func (r *Keyring) Reload() error {
	if r.closed.Load() {
		return ErrClosed
	}
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	err := r.krLoad(true)
	r.checked()
	return err
}

// LastError returns why the latest load failed, or nil if it succeeded
// (an unchanged file counts as a success).
func (r *Keyring) LastError() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.lastErr
}

// RootKeyProvider returns the provider that opens a sealed keyring, or
// nil for one in the clear.
func (r *Keyring) RootKeyProvider() RootKeyProvider { return r.provider }

// Close stops the poller and drops the keys; later Get and List calls fail
// with ErrClosed. Closing twice is not an error.
func (r *Keyring) Close() error {
	r.closeOnce.Do(func() {
		r.watch.Close()
		r.closed.Store(true)
		close(r.stop)
		if r.done != nil {
			<-r.done
		}
		r.set.Store(nil)
	})
	return nil
}

func (r *Keyring) krPoll(interval time.Duration) {
	defer close(r.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.reloadMu.Lock()
			_ = r.krLoad(false) // logged and kept for LastError
			r.reloadMu.Unlock()
			r.checked()
		}
	}
}

// krLoad reads the file and, if its hash differs from the loaded set's,
// parses it. Without force it first skips a file whose os.Stat is unchanged
// (unless recently modified) or whose content was already tried. Callers
// hold reloadMu (or own r exclusively, in OpenKeyring).
func (r *Keyring) krLoad(force bool) error {
	fi, err := os.Stat(r.path)
	if err != nil {
		return r.krFail(err, force)
	}
	if !force && r.lastStat != nil && krSameStat(r.lastStat, fi) && time.Since(fi.ModTime()) > krRacyWindow {
		return nil
	}
	data, err := krReadFile(r.path)
	if err != nil {
		return r.krFail(err, force)
	}
	defer clear(data)
	r.lastStat = fi
	sum := sha256.Sum256(data)
	if !force && sum == r.lastSeen {
		return nil // this content was already loaded, or rejected and reported
	}
	r.lastSeen = sum
	if cur := r.set.Load(); cur != nil && cur.sum == sum {
		r.krSetErr(nil)
		return nil
	}
	set, err := krParse(data, krOpener(context.Background(), r.provider))
	if err != nil {
		return r.krFail(err, force)
	}
	set.sum = sum
	old := r.set.Load()
	changed := r.krRevise(old, set)
	r.set.Store(set)
	r.krSetErr(nil)
	if old != nil {
		r.log.Info("keyring reloaded", zap.String("path", r.path), zap.Int("keys", len(set.names)))
	}
	for _, name := range changed {
		r.watch.Notify(name)
	}
	return nil
}

// krRevise gives the keys of a new set their revisions: an unchanged key
// keeps its own, a new or changed one gets a new one. It returns the names
// of the keys added, changed or removed.
func (r *Keyring) krRevise(old, set *krSet) []string {
	var changed []string
	for _, name := range set.names {
		k := set.keys[name]
		if old != nil {
			if o := old.keys[name]; o != nil && ksSameKey(o, k) {
				k.Revision = o.Revision
				continue
			}
		}
		r.rev++
		k.Revision = r.rev
		if old != nil {
			changed = append(changed, name)
		}
	}
	if old != nil {
		for _, name := range old.names {
			if _, ok := set.keys[name]; !ok {
				changed = append(changed, name)
			}
		}
	}
	return changed
}

// ksSameKey reports whether a and b hold the same metadata and material.
func ksSameKey(a, b *StoredKey) bool {
	return a.Name == b.Name && a.Created.Equal(b.Created) && reflect.DeepEqual(a.Config, b.Config) &&
		len(a.Versions) == len(b.Versions) && a.MinAvailable == b.MinAvailable && CheckAppendOnly(a, b) == nil &&
		slices.Equal(a.Disabled, b.Disabled) && sameDeletion(a.Deletion, b.Deletion)
}

// krFail records err for LastError and logs it, once per distinct error
// while polling. err never holds material (see ksUnmarshalStrict).
func (r *Keyring) krFail(err error, force bool) error {
	err = fmt.Errorf("cryptosvc: keyring %s: %w", r.path, err)
	r.errMu.Lock()
	repeat := r.lastErr != nil && r.lastErr.Error() == err.Error()
	r.lastErr = err
	r.errMu.Unlock()
	if r.set.Load() != nil && (force || !repeat) {
		r.log.Error("keyring rejected; keeping the previous keys", zap.String("path", r.path), zap.Error(err))
	}
	if _, ok := errors.AsType[*os.PathError](err); ok {
		// The file went away or became unreadable: parse it again whatever
		// its hash when it comes back.
		r.lastSeen = [sha256.Size]byte{}
		r.lastStat = nil
	}
	return err
}

func (r *Keyring) krSetErr(err error) {
	r.errMu.Lock()
	r.lastErr = err
	r.errMu.Unlock()
}

func krSameStat(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && a.Mode() == b.Mode()
}

func krReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, krMaxFileSize+1))
	if err != nil {
		clear(data)
		return nil, err
	}
	if len(data) > krMaxFileSize {
		clear(data)
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrInvalidConfig, krMaxFileSize)
	}
	return data, nil
}

// krFile is the keyring file's top level.
type krFile struct {
	Version int        `json:"cipherd_keyring"`
	Keys    []ksRecord `json:"keys"`
}

// krParse decodes and validates a whole keyring. open opens a sealed one
// (version 2, keyring_sealed.go); nil refuses it.
func krParse(data []byte, open func([]byte) ([]ksRecord, error)) (*krSet, error) {
	var f krFile
	defer func() {
		for i := range f.Keys {
			f.Keys[i].clearSecrets()
		}
	}()
	var peek struct {
		Version int `json:"cipherd_keyring"`
	}
	if json.Unmarshal(data, &peek) == nil && peek.Version == 2 {
		if open == nil {
			return nil, fmt.Errorf("%w: a sealed keyring (version 2) needs the root key that sealed it: set root_key_uri or root_key_file", ErrRootKey)
		}
		recs, err := open(data)
		if err != nil {
			return nil, err
		}
		f = krFile{Version: 1, Keys: recs}
	} else if err := ksUnmarshalStrict(data, &f, ErrInvalidConfig); err != nil {
		return nil, err
	}
	switch f.Version {
	case 1:
	case 0:
		return nil, fmt.Errorf("%w: not a cipherd keyring (\"cipherd_keyring\": 1 is missing)", ErrInvalidConfig)
	default:
		return nil, fmt.Errorf("%w: keyring format version %d", ErrUnsupported, f.Version)
	}
	set := &krSet{keys: make(map[string]*StoredKey, len(f.Keys))}
	for i := range f.Keys {
		k, err := f.Keys[i].storedKey()
		if err != nil {
			return nil, fmt.Errorf("keys[%d]: %w", i, err)
		}
		if _, dup := set.keys[k.Name]; dup {
			return nil, fmt.Errorf("%w: keys[%d]: duplicate key name %s", ErrInvalidConfig, i, k.Name)
		}
		set.keys[k.Name] = k
	}
	set.names = ksSortedNames(set.keys)
	return set, nil
}

// ReadKeyring reads a keyring file's content from r and validates it exactly
// as OpenKeyring does. It returns the keys sorted by name; they own their
// material. It is for the tooling that edits keyring files (cipherd keyring).
func ReadKeyring(r io.Reader) ([]*StoredKey, error) {
	data, err := io.ReadAll(io.LimitReader(r, krMaxFileSize+1))
	defer clear(data)
	if err != nil {
		return nil, err
	}
	if len(data) > krMaxFileSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrInvalidConfig, krMaxFileSize)
	}
	set, err := krParse(data, nil)
	if err != nil {
		return nil, err
	}
	keys := make([]*StoredKey, len(set.names))
	for i, name := range set.names {
		keys[i] = set.keys[name]
	}
	return keys, nil
}

// WriteKeyring writes keys, sorted by name, in the keyring file format.
// The output holds every key's material in the clear, by design: it is for
// tests and for the tooling that builds a Kubernetes Secret. Keep it off
// logs, terminals and unencrypted disks.
func WriteKeyring(w io.Writer, keys []*StoredKey) error {
	sorted := slices.Clone(keys)
	for _, k := range sorted {
		if k == nil {
			return fmt.Errorf("%w: nil key", ErrInvalidConfig)
		}
		if err := k.Validate(); err != nil {
			return err
		}
	}
	slices.SortFunc(sorted, func(a, b *StoredKey) int { return strings.Compare(a.Name, b.Name) })
	f := krFile{Version: 1, Keys: make([]ksRecord, 0, len(sorted))}
	for i, k := range sorted {
		if i > 0 && sorted[i-1].Name == k.Name {
			return fmt.Errorf("%w: duplicate key name %s", ErrInvalidConfig, k.Name)
		}
		f.Keys = append(f.Keys, ksRecordOf(k))
	}
	b, err := json.MarshalIndent(f, "", "  ")
	defer clear(b)
	if err != nil {
		return fmt.Errorf("cryptosvc: encoding keyring: %w", err)
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	_, err = io.WriteString(w, "\n")
	return err
}
