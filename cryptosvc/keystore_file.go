package cryptosvc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"go.uber.org/zap"
)

// The file keystore keeps one directory, held by one process at a time:
//
//	dir/              0700
//	  .lock           empty; flock(2)ed exclusively while a FileStore is open
//	  storagekey.json the storage key, wrapped by the root-key provider
//	  root.check      a fixed plaintext sealed under the storage key
//	  root.key        the development root key (DevRootKey only), base64
//	  rotate.json     the check file of a root-key rotation (rootkey_rotate.go)
//	  tokens.json     the service tokens, hashed, in clear (tokens_file.go)
//	  usage.json      the usage counts per key version, in clear (usage_file.go)
//	  keys/           0700
//	    <name>.key    one sealed record per key
//	  .tmp-*, keys/.tmp-*  partial writes, removed at open
//
// Every file is 0600 and written atomically: a temporary file in the same
// directory, fsync, rename over the target, fsync of the directory.
//
// storagekey.json is a WrappedStorageKey in its JSON form, preceded by a
// version: {"v":2,"generation":1,"root_key":"static","wrapped":"<base64>"}.
// Key files and root.check are sealed records (rootkey_seal.go) of kind
// "key" and the key's name, and of kind "check" and no name. The plaintext
// of a key file is the key's record in the keyring file format
// (keystore_record.go), material in base64; that of root.check is
// ksCheckPlain. Unknown versions, unknown fields and trailing bytes are
// rejected.
//
// Layout 1 is the same directory without storagekey.json: its records are
// sealed under generation 0, the storage key derived from a static root key.
// Such a store keeps opening with that root key, and stays in layout 1 until
// a root-key rotation (RotateFileStore) re-seals it into layout 2; a
// directory that holds neither storagekey.json nor any record is created in
// layout 2.

const (
	ksCheckPlain    = "cipherd keystore root key check v1"
	ksStorageKey    = "storagekey.json"
	ksTempPrefix    = ".tmp-"
	ksKeySuffix     = ".key"
	ksMaxSealedSize = 16 << 20
)

// FileStoreConfig configures OpenFileStore.
type FileStoreConfig struct {
	// RootKeyProvider wraps and unwraps the storage key that seals the key
	// files at rest. nil means RootKey decides. The store does not close
	// it.
	RootKeyProvider RootKeyProvider
	// RootKey, when RootKeyProvider is nil, is a static root key (see
	// LoadRootKey). nil means DevRootKey decides; nil with DevRootKey false
	// fails with ErrRootKey.
	RootKey *Secret
	// DevRootKey, when RootKeyProvider and RootKey are nil, keeps the root key in dir/root.key,
	// creating it on first use, and logs a warning at every open: the
	// material then sits next to what it protects. For development only.
	// false (the default) requires RootKey.
	DevRootKey bool
	// Logger receives warnings (development root key, loose directory
	// permissions, stray files); never material. nil means no logging.
	Logger *zap.Logger
	// Rand supplies nonces and a new development root key. nil means
	// crypto/rand.Reader.
	Rand io.Reader
}

// FileStore is the file keystore: one directory, key material encrypted at
// rest under a root key. Every key is loaded at open; Get and List are
// served from memory, and writes go to disk first, then to memory. Keys
// returned by Get are shared: do not modify them.
//
// Key names that differ only in case cannot both be created, since some
// file systems cannot tell their files apart.
type FileStore struct {
	dir, keysDir string
	rand         io.Reader
	log          *zap.Logger
	lock         *os.File

	// Guarded by wmu once open: the sealer (read by writers only), the
	// provider that wraps the current storage key, a rotation found half
	// done at open, and whether the root key is the development one.
	seal     *Sealer
	provider RootKeyProvider
	pending  *ksRotation
	dev      bool

	wmu    sync.Mutex // serializes writes and Close
	keySet            // the keys in memory; writers also hold wmu

	umu         sync.Mutex                  // serializes usage.json's writes; guards usageTotals
	usageTotals map[versionRef]VersionUsage // as usage.json holds them (usage_file.go)
}

var _ Keystore = (*FileStore)(nil)

// ksStorageKeyFile is storagekey.json.
type ksStorageKeyFile struct {
	V int `json:"v"`
	WrappedStorageKey
}

// OpenFileStore opens the keystore in dir, creating dir (0700) if needed,
// and loads every key. It fails with ErrLocked if another FileStore, in
// this process or another, holds dir; with ErrRootKey if the root key is
// missing or is not the one the keystore was created with; and with an
// error naming the file if a key file does not decode.
func OpenFileStore(dir string, cfg FileStoreConfig) (_ *FileStore, err error) {
	if cfg.RootKeyProvider == nil && cfg.RootKey == nil && !cfg.DevRootKey {
		return nil, fmt.Errorf("%w: FileStoreConfig.RootKey is nil and DevRootKey is off", ErrRootKey)
	}
	s := &FileStore{
		dir:     filepath.Clean(dir),
		rand:    cfg.Rand,
		log:     cfg.Logger,
		keySet:  keySet{keys: make(map[string]*StoredKey)},
		keysDir: filepath.Join(filepath.Clean(dir), "keys"),
	}
	if s.rand == nil {
		s.rand = rand.Reader
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if err := ksMkdir(s.dir, s.log); err != nil {
		return nil, err
	}
	s.lock, err = ksLockDir(filepath.Join(s.dir, ".lock"))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.lock.Close()
		}
	}()

	provider := cfg.RootKeyProvider
	rootKeyPath := filepath.Join(s.dir, "root.key")
	dev := provider == nil && cfg.RootKey == nil
	if provider == nil {
		root := cfg.RootKey
		if dev {
			if err := s.ksNeedsGivenRootKey(rootKeyPath); err != nil {
				return nil, err
			}
			sec, err := ksDevRootKey(rootKeyPath, s.rand)
			if err != nil {
				return nil, err
			}
			root = &sec
		}
		if provider, err = NewStaticRootKey(root, s.rand); err != nil {
			return nil, err
		}
	}
	if err := ksMkdir(s.keysDir, s.log); err != nil {
		return nil, err
	}
	for _, d := range []string{s.dir, s.keysDir} {
		if err := ksRemoveTemps(d); err != nil {
			return nil, err
		}
	}
	s.provider, s.dev = provider, dev
	if err := s.ksOpenStorageKey(context.Background(), provider); err != nil {
		return nil, err
	}

	checkPath := filepath.Join(s.dir, "root.check")
	haveCheck, err := s.ksVerifyCheck(checkPath)
	if err != nil {
		return nil, err
	}
	if err := s.ksLoadKeys(); err != nil {
		return nil, err
	}
	if err := s.ksLoadTokens(); err != nil {
		return nil, err
	}
	if err := s.ksLoadUsage(); err != nil {
		return nil, err
	}
	if !haveCheck {
		// Written only now, once every existing key has opened under this
		// root key.
		if err := s.ksWriteSealed(s.dir, "root.check", []byte(ksCheckPlain), "check", ""); err != nil {
			return nil, err
		}
	}
	if dev {
		s.log.Warn("development root key stored next to the keys: not for production",
			zap.String("path", rootKeyPath))
	}
	if s.pending != nil {
		s.log.Warn("a root-key rotation is half done: the store opens with either root key until it is finished; run cipherd rootkey rotate again with the new root key to finish it",
			zap.String("path", filepath.Join(s.dir, ksRotationFile)),
			zap.String("from", s.pending.ToUnderOld.RootKey), zap.String("to", s.pending.To.RootKey))
	}
	return s, nil
}

// ksOpenStorageKey sets s.seal: from storagekey.json, from the static root
// key of a store of layout 1, or from a new storage key (a new store).
func (s *FileStore) ksOpenStorageKey(ctx context.Context, p RootKeyProvider) error {
	if done, err := s.ksOpenRotation(ctx, p); done || err != nil {
		return err
	}
	path := filepath.Join(s.dir, ksStorageKey)
	w, err := ksReadStorageKey(path)
	switch {
	case err == nil:
		s.seal, err = OpenStorageKey(ctx, p, w, s.rand)
		if err != nil {
			return fmt.Errorf("cryptosvc: keystore %s: %w", path, err)
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	legacy, err := s.ksHasRecords()
	if err != nil {
		return err
	}
	if legacy {
		st, ok := p.(*StaticRootKey)
		if !ok {
			return fmt.Errorf("%w: the keystore in %s is of layout 1, sealed under a static root key, not %s: open it with that key and rotate the root key to move it", ErrRootKey, s.dir, p)
		}
		s.seal, err = ssLegacySealer(&st.root, s.rand)
		return err
	}
	seal, nw, err := NewStorageKey(ctx, p, 1, s.rand)
	if err != nil {
		return fmt.Errorf("cryptosvc: keystore: creating the storage key: %w", err)
	}
	if err := ksWriteStorageKey(s.dir, nw); err != nil {
		return err
	}
	s.seal = seal
	return nil
}

// ksHasRecords reports whether the directory holds a record: root.check or
// a key file.
func (s *FileStore) ksHasRecords() (bool, error) {
	if _, err := os.Lstat(filepath.Join(s.dir, "root.check")); err == nil {
		return true, nil
	}
	entries, err := os.ReadDir(s.keysDir)
	if err != nil {
		return false, fmt.Errorf("cryptosvc: keystore: %w", err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ksKeySuffix) {
			return true, nil
		}
	}
	return false, nil
}

func ksReadStorageKey(path string) (*WrappedStorageKey, error) {
	data, err := ksReadSmall(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("cryptosvc: keystore: %w", err)
	}
	var f ksStorageKeyFile
	if err := ksUnmarshalStrict(data, &f, ErrMalformed); err != nil {
		return nil, fmt.Errorf("cryptosvc: keystore file %s: %w", path, err)
	}
	if f.V != 2 {
		return nil, fmt.Errorf("cryptosvc: keystore file %s: %w: version %d", path, ErrUnsupported, f.V)
	}
	if f.Generation == 0 || len(f.Wrapped) == 0 {
		return nil, fmt.Errorf("cryptosvc: keystore file %s: %w: no generation or no wrapped key", path, ErrMalformed)
	}
	return &f.WrappedStorageKey, nil
}

func ksWriteStorageKey(dir string, w *WrappedStorageKey) error {
	b, err := json.Marshal(&ksStorageKeyFile{V: 2, WrappedStorageKey: *w})
	if err != nil {
		return err
	}
	if err := ksWriteFileAtomic(dir, ksStorageKey, append(b, '\n')); err != nil {
		return fmt.Errorf("cryptosvc: keystore: writing the storage key: %w", err)
	}
	return nil
}

// Create writes a new key. It fails with ErrKeyExists if a key of that
// name, or of a name equal to it but for case, exists.
func (s *FileStore) Create(ctx context.Context, k *StoredKey) error {
	k, err := ksValidClone(k)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.ksWritable(ctx); err != nil {
		return err
	}
	for n := range s.keys {
		if strings.EqualFold(n, k.Name) {
			if n == k.Name {
				return ksExists(k.Name)
			}
			return fmt.Errorf("%w: %s differs from %s only in case", ErrKeyExists, k.Name, n)
		}
	}
	s.rev++
	k.Revision = s.rev
	if err := s.ksPut(k); err != nil {
		return err
	}
	// A key made under the name of one deleted before starts from zero.
	s.ksForgetUsage(k.Name)
	return nil
}

// Update replaces the key of k's name if its revision is k.Revision.
func (s *FileStore) Update(ctx context.Context, k *StoredKey) error {
	k, err := ksValidClone(k)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.ksWritable(ctx); err != nil {
		return err
	}
	if err := s.checkUpdate(k); err != nil {
		return err
	}
	return s.ksPut(k)
}

// Delete removes the key named name if its revision is revision.
func (s *FileStore) Delete(ctx context.Context, name string, revision uint64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.ksWritable(ctx); err != nil {
		return err
	}
	if err := s.checkDelete(name, revision); err != nil {
		return err
	}
	if err := os.Remove(s.ksKeyPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cryptosvc: keystore: deleting key %s: %w", name, err)
	}
	if err := ksSyncDir(s.keysDir); err != nil {
		return fmt.Errorf("cryptosvc: keystore: deleting key %s: %w", name, err)
	}
	s.mu.Lock()
	delete(s.keys, name)
	s.mu.Unlock()
	s.watch.Notify(name)
	return nil
}

// Close releases the directory; later calls fail with ErrClosed. It waits
// for a write in progress. Closing twice is not an error.
func (s *FileStore) Close() error {
	s.watch.Close()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.keys = nil
	return s.lock.Close() // closing the descriptor releases the flock
}

// ksWritable is checked under wmu before a write.
func (s *FileStore) ksWritable(ctx context.Context) error {
	if s.closed {
		return ErrClosed
	}
	return ctx.Err()
}

// ksPut writes k (validated, owned, with its new revision) to disk, then
// to memory, and tells the watchers. Callers hold wmu. If the error comes after the rename (a failed directory fsync), the
// new file may or may not survive a crash; memory keeps the old key.
func (s *FileStore) ksPut(k *StoredKey) error {
	rec := ksRecordOf(k)
	pt, err := json.Marshal(&rec)
	defer clear(pt)
	if err != nil {
		return fmt.Errorf("cryptosvc: keystore: encoding key %s: %w", k.Name, err)
	}
	if err := s.ksWriteSealed(s.keysDir, k.Name+ksKeySuffix, pt, "key", k.Name); err != nil {
		return fmt.Errorf("cryptosvc: keystore: writing key %s: %w", k.Name, err)
	}
	s.mu.Lock()
	s.keys[k.Name] = k
	s.mu.Unlock()
	s.watch.Notify(k.Name)
	return nil
}

func (s *FileStore) ksKeyPath(name string) string {
	return filepath.Join(s.keysDir, name+ksKeySuffix)
}

// ksWriteSealed seals pt as the record (kind, name) and writes it
// atomically to dir/file.
func (s *FileStore) ksWriteSealed(dir, file string, pt []byte, kind, name string) error {
	b, err := s.seal.Seal(kind, name, pt)
	if err != nil {
		return err
	}
	return ksWriteFileAtomic(dir, file, append(b, '\n'))
}

// ksVerifyCheck opens root.check, reporting whether it exists.
func (s *FileStore) ksVerifyCheck(path string) (bool, error) {
	data, err := ksReadSmall(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cryptosvc: keystore: %w", err)
	}
	pt, err := s.seal.Open("check", "", data)
	defer clear(pt)
	switch {
	case errors.Is(err, ErrAuthFailed):
		return false, fmt.Errorf("%w: it does not open %s (another root key sealed this keystore, or the file is damaged)", ErrRootKey, path)
	case err != nil:
		return false, fmt.Errorf("cryptosvc: keystore file %s: %w", path, err)
	case !bytes.Equal(pt, []byte(ksCheckPlain)):
		return false, fmt.Errorf("cryptosvc: keystore file %s: %w: unexpected content", path, ErrMalformed)
	}
	return true, nil
}

// ksLoadKeys reads every keys/<name>.key into memory.
func (s *FileStore) ksLoadKeys() error {
	entries, err := os.ReadDir(s.keysDir)
	if err != nil {
		return fmt.Errorf("cryptosvc: keystore: %w", err)
	}
	for _, e := range entries {
		file := e.Name()
		path := filepath.Join(s.keysDir, file)
		name, ok := strings.CutSuffix(file, ksKeySuffix)
		if !ok {
			s.log.Warn("keystore: ignoring a file that is not a key", zap.String("path", path))
			continue
		}
		if err := ValidateKeyName(name); err != nil {
			return fmt.Errorf("cryptosvc: keystore file %s: %w", path, err)
		}
		if !e.Type().IsRegular() {
			return fmt.Errorf("cryptosvc: keystore file %s: not a regular file", path)
		}
		k, err := s.ksLoadKey(path, name)
		if err != nil {
			return fmt.Errorf("cryptosvc: keystore file %s: %w", path, err)
		}
		s.rev++
		k.Revision = s.rev
		s.keys[name] = k
	}
	return nil
}

func (s *FileStore) ksLoadKey(path, name string) (*StoredKey, error) {
	data, err := ksReadSmall(path)
	if err != nil {
		return nil, err
	}
	pt, err := s.seal.Open("key", name, data)
	defer clear(pt)
	if errors.Is(err, ErrAuthFailed) {
		return nil, fmt.Errorf("%w (the file is damaged, was renamed from another key, or was sealed under another root key)", err)
	}
	if err != nil {
		return nil, err
	}
	var rec ksRecord
	defer rec.clearSecrets()
	if err := ksUnmarshalStrict(pt, &rec, ErrMalformed); err != nil {
		return nil, err
	}
	k, err := rec.storedKey()
	if err != nil {
		return nil, err
	}
	if k.Name != name {
		return nil, fmt.Errorf("%w: the file holds another key", ErrMalformed)
	}
	return k, nil
}

// ksNeedsGivenRootKey refuses a development root key for a keystore that
// exists without one at devPath: one made under a root key this open was
// not given (moved to another with cipherd rootkey rotate, say). A new
// development key could open none of it, and left behind, it would be
// taken for the keystore's own at the next start.
func (s *FileStore) ksNeedsGivenRootKey(devPath string) error {
	if _, err := os.Lstat(devPath); !errors.Is(err, fs.ErrNotExist) {
		return nil // there is one, or an error that reading it will report
	}
	made := false
	for _, name := range []string{ksStorageKey, "root.check", ksRotationFile} {
		if _, err := os.Lstat(filepath.Join(s.dir, name)); err == nil {
			made = true
		}
	}
	if entries, err := os.ReadDir(s.keysDir); err == nil {
		for _, e := range entries {
			made = made || strings.HasSuffix(e.Name(), ksKeySuffix)
		}
	}
	if made {
		return fmt.Errorf("%w: the keystore in %s was made under a root key this start was not given, and holds no development root key: give its root key (root_key_file, CIPHERD_ROOT_KEY or root_key_uri)", ErrRootKey, s.dir)
	}
	return nil
}

// ksDevRootKey reads the development root key at path, creating it first
// if it does not exist.
func ksDevRootKey(path string, r io.Reader) (Secret, error) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		sec, err := GenerateSecret(r)
		if err != nil {
			return Secret{}, err
		}
		text := base64.StdEncoding.AppendEncode(nil, sec.Expose())
		text = append(text, '\n')
		defer clear(text)
		if err := ksWriteFileAtomic(filepath.Dir(path), filepath.Base(path), text); err != nil {
			return Secret{}, fmt.Errorf("cryptosvc: keystore: creating the development root key: %w", err)
		}
		return sec, nil
	}
	return LoadRootKey(path, "")
}
