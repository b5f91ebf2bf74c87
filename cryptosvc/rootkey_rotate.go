package cryptosvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"go.uber.org/zap"
)

// A root-key rotation of a file store (RotateRootKey) replaces the storage
// key as well as the root key, and re-seals every record, so that the old
// root key with an old copy of storagekey.json opens none of the records
// written after it. With n the current generation, it
//
//  1. generates storage key n+1 and writes the check file rotate.json,
//     which holds key n+1 wrapped under the new root key ("to") and under
//     the old one ("to_under_old"), and key n wrapped under the new root
//     key ("from_under_new") and, for n ≥ 1, under the old one ("from");
//  2. re-seals every key file and root.check under key n+1;
//  3. replaces storagekey.json with "to" (the commit point);
//  4. removes rotate.json, and root.key if the old root key was the
//     development one.
//
// Every write is atomic, and from step 1 to step 4 either root key unwraps
// both storage keys from rotate.json, so a process killed at any point
// leaves a store that opens with the old root key or the new one. A store
// that opens with rotate.json present holds both generations, seals new
// records under n+1 and logs a warning; RotateRootKey with the new root key
// finishes the rotation (the re-seal is idempotent), and one with any other
// root key is refused. Nothing is ever written in the clear: the storage
// keys are on disk only wrapped.
//
// Until step 4, rotate.json lets the old root key open the new records: a
// backup taken during a rotation, with the old root key, opens everything
// in it.

const ksRotationFile = "rotate.json"

// ksRotation is rotate.json.
type ksRotation struct {
	V            int                `json:"v"`
	From         *WrappedStorageKey `json:"from"` // null for generation 0
	FromUnderNew *WrappedStorageKey `json:"from_under_new"`
	To           *WrappedStorageKey `json:"to"`
	ToUnderOld   *WrappedStorageKey `json:"to_under_old"`
}

// ksRotateHook, when set (by tests), runs after each durable step of a
// rotation, numbered from 1.
var ksRotateHook func(step int)

func ksRotateStep(step *int) {
	*step++
	if ksRotateHook != nil {
		ksRotateHook(*step)
	}
}

// RotateRootKey moves the store to the root key of to: a new storage key
// wrapped by to, every record re-sealed (see above). It holds the store's
// write lock throughout, so Get and List go on while Create, Update and
// Delete wait. A store of layout 1 leaves it for layout 2. If a rotation
// was found half done at open, to must be its new root key, and this
// finishes it. On success the store's provider is to; the caller keeps
// ownership of both providers.
func (s *FileStore) RotateRootKey(ctx context.Context, to RootKeyProvider) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.ksWritable(ctx); err != nil {
		return err
	}
	step := 0
	j := s.pending
	if j != nil {
		if _, err := ssUnwrap(ctx, to, j.To, s.rand); err != nil {
			if errors.Is(err, ErrRootKey) {
				return fmt.Errorf("%w: a rotation to %s is half done: finish it with that root key first", ErrRootKey, j.To.RootKey)
			}
			return fmt.Errorf("cryptosvc: keystore: %w", err)
		}
	} else {
		cur := s.seal
		g := cur.Generation()
		next, wTo, err := NewStorageKey(ctx, to, g+1, s.rand)
		if err != nil {
			return fmt.Errorf("cryptosvc: keystore: %w", err)
		}
		j = &ksRotation{V: 2, To: wTo}
		if j.ToUnderOld, err = next.WrapFor(ctx, s.provider, g+1); err == nil {
			j.FromUnderNew, err = cur.WrapFor(ctx, to, g)
		}
		if err == nil && g > 0 {
			j.From, err = cur.WrapFor(ctx, s.provider, g)
		}
		if err != nil {
			return fmt.Errorf("cryptosvc: keystore: %w", err)
		}
		if err := ksWriteJSON(s.dir, ksRotationFile, j); err != nil {
			return fmt.Errorf("cryptosvc: keystore: writing %s: %w", ksRotationFile, err)
		}
		ksRotateStep(&step)
		s.seal = next.Including(cur)
		s.pending = j
	}
	for _, name := range ksSortedNames(s.keys) {
		if err := ctx.Err(); err != nil {
			return err // resumable: rotate.json stays
		}
		if err := s.ksPut(s.keys[name]); err != nil {
			return err
		}
		ksRotateStep(&step)
	}
	if err := s.ksWriteSealed(s.dir, "root.check", []byte(ksCheckPlain), "check", ""); err != nil {
		return fmt.Errorf("cryptosvc: keystore: re-sealing root.check: %w", err)
	}
	ksRotateStep(&step)
	if err := ksWriteStorageKey(s.dir, j.To); err != nil {
		return err
	}
	ksRotateStep(&step)
	if err := os.Remove(filepath.Join(s.dir, ksRotationFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cryptosvc: keystore: removing %s: %w", ksRotationFile, err)
	}
	if err := ksSyncDir(s.dir); err != nil {
		return fmt.Errorf("cryptosvc: keystore: removing %s: %w", ksRotationFile, err)
	}
	ksRotateStep(&step)
	s.seal = s.seal.Only()
	s.provider = to
	s.pending = nil
	if s.dev {
		s.dev = false
		path := filepath.Join(s.dir, "root.key")
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("the development root key no longer opens this store but could not be removed", zap.String("path", path), zap.Error(err))
		} else {
			ksSyncDir(s.dir)
		}
	}
	s.log.Info("root key rotated", zap.String("root_key", to.String()), zap.Uint32("storage_key_generation", j.To.Generation), zap.Int("keys", len(s.keys)))
	return nil
}

// RootKeyProvider returns the provider that wraps the storage key now: the
// new root key once a rotation is done.
func (s *FileStore) RootKeyProvider() RootKeyProvider {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.provider
}

// RootKey returns the name of the provider that wraps the storage key
// (RootKeyProvider.String), and the storage key's generation (0 for a store
// of layout 1). rotating reports a rotation half done.
func (s *FileStore) RootKey() (provider string, generation uint32, rotating bool) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.provider.String(), s.seal.Generation(), s.pending != nil
}

func ksWriteJSON(dir, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return ksWriteFileAtomic(dir, name, append(b, '\n'))
}

// ksOpenRotation opens a store with rotate.json, reporting whether there
// was one: p may be the old root key or the new one.
func (s *FileStore) ksOpenRotation(ctx context.Context, p RootKeyProvider) (bool, error) {
	path := filepath.Join(s.dir, ksRotationFile)
	data, err := ksReadSmall(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("cryptosvc: keystore: %w", err)
	}
	var j ksRotation
	if err := ksUnmarshalStrict(data, &j, ErrMalformed); err != nil {
		return true, fmt.Errorf("cryptosvc: keystore file %s: %w", path, err)
	}
	switch {
	case j.V != 2:
		return true, fmt.Errorf("cryptosvc: keystore file %s: %w: version %d", path, ErrUnsupported, j.V)
	case j.To == nil || j.ToUnderOld == nil || j.FromUnderNew == nil,
		j.To.Generation == 0 || j.ToUnderOld.Generation != j.To.Generation || j.FromUnderNew.Generation+1 != j.To.Generation,
		(j.From == nil) != (j.FromUnderNew.Generation == 0),
		j.From != nil && j.From.Generation != j.FromUnderNew.Generation:
		return true, fmt.Errorf("cryptosvc: keystore file %s: %w: inconsistent generations", path, ErrMalformed)
	}
	var old, next *Sealer
	// p as the old root key.
	next, err = ssUnwrap(ctx, p, j.ToUnderOld, s.rand)
	if err == nil {
		if j.From != nil {
			old, err = ssUnwrap(ctx, p, j.From, s.rand)
		} else if st, ok := p.(*StaticRootKey); ok {
			old, err = ssLegacySealer(&st.root, s.rand)
		} else {
			err = fmt.Errorf("%w: %s wrapped a rotation off layout 1, which only a static root key can", ErrMalformed, p)
		}
	} else if errors.Is(err, ErrRootKey) {
		// p as the new root key.
		next, err = ssUnwrap(ctx, p, j.To, s.rand)
		if err == nil {
			old, err = ssUnwrap(ctx, p, j.FromUnderNew, s.rand)
		} else if errors.Is(err, ErrRootKey) {
			err = fmt.Errorf("%w: a rotation from %s to %s is half done, and %s is neither", ErrRootKey, j.ToUnderOld.RootKey, j.To.RootKey, p)
		}
	}
	if err != nil {
		return true, fmt.Errorf("cryptosvc: keystore %s: %w", path, err)
	}
	s.seal = next.Including(old)
	s.pending = &j
	return true, nil
}

// FileStoreInUse reports whether a FileStore, in this process or another,
// holds dir now. A directory that does not exist is not in use.
func FileStoreInUse(dir string) (bool, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	f, err := ksLockDir(filepath.Join(dir, ".lock"))
	if errors.Is(err, ErrLocked) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return false, f.Close()
}
