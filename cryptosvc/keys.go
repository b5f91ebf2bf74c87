package cryptosvc

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"go.uber.org/zap"
)

// CreateKey makes a new key with a random version 1.
func (s *Service) CreateKey(ctx context.Context, name string, cfg KeyConfig) (Key, error) {
	secret, err := GenerateSecret(s.rand)
	if err != nil {
		return Key{}, err
	}
	return s.ImportKey(ctx, name, []Secret{secret}, cfg)
}

// ImportKey makes a new key from existing material: secrets become versions
// 1, 2, … in order. The material is copied.
func (s *Service) ImportKey(ctx context.Context, name string, secrets []Secret, cfg KeyConfig) (Key, error) {
	if len(secrets) == 0 {
		return Key{}, fmt.Errorf("%w: a key needs at least one version", ErrInvalidConfig)
	}
	now := s.now().UTC()
	k := &StoredKey{Name: name, Created: now, Config: cfg.Canonical()}
	for i, sec := range secrets {
		k.Versions = append(k.Versions, StoredVersion{KeyVersion: KeyVersion{Version: uint32(i + 1), Created: now}, Secret: sec})
	}
	if err := k.Validate(); err != nil {
		return Key{}, err
	}
	if err := s.checkRotationPeriod(k.Config); err != nil {
		return Key{}, err
	}
	if err := s.store.Create(ctx, k); err != nil {
		return Key{}, err
	}
	s.log.Info("key created", zap.String("key", name), zap.Int("versions", len(secrets)))
	return k.Describe(), nil
}

// DescribeKey returns a key's metadata, never its material.
func (s *Service) DescribeKey(ctx context.Context, name string) (Key, error) {
	k, err := s.key(ctx, name)
	if err != nil {
		return Key{}, err
	}
	return k.Describe(), nil
}

// ListKeys returns every key's metadata, sorted by name.
func (s *Service) ListKeys(ctx context.Context) ([]Key, error) {
	names, err := s.store.List(ctx)
	if err != nil {
		return nil, err
	}
	keys := make([]Key, 0, len(names))
	for _, n := range names {
		k, err := s.store.Get(ctx, n)
		if err != nil {
			continue // deleted meanwhile
		}
		keys = append(keys, k.Describe())
	}
	return keys, nil
}

// RotateKey adds a new random version, which seals all new data from now on.
// Older versions keep opening what they sealed.
func (s *Service) RotateKey(ctx context.Context, name string) (Key, error) {
	return s.rotate(ctx, name, nil)
}

// RotateKeyImport adds a version made of existing material (bring your own
// key), which seals all new data from now on, as RotateKey does. The
// material is copied. Material equal to one of the key's versions is
// refused (ErrInvalidConfig): a rotation that changes nothing must not
// look like one.
func (s *Service) RotateKeyImport(ctx context.Context, name string, secret Secret) (Key, error) {
	return s.rotate(ctx, name, &secret)
}

func (s *Service) rotate(ctx context.Context, name string, secret *Secret) (Key, error) {
	k, err := s.modifyKey(ctx, name, func(k *StoredKey) (bool, error) {
		if err := k.pending(); err != nil {
			return false, err
		}
		return true, s.addVersion(k, secret)
	})
	if err != nil {
		return Key{}, err
	}
	s.log.Info("key rotated", zap.String("key", name), zap.Uint32("version", k.Latest().Version), zap.Bool("imported", secret != nil))
	return k.Describe(), nil
}

// addVersion appends a new version to k: secret, or a random one when
// secret is nil.
func (s *Service) addVersion(k *StoredKey, secret *Secret) error {
	var sec Secret
	if secret != nil {
		for i := range k.Versions {
			if subtle.ConstantTimeCompare(k.Versions[i].Secret.b[:], secret.b[:]) == 1 {
				return fmt.Errorf("%w: the material of an existing version", ErrInvalidConfig)
			}
		}
		sec = *secret
	} else {
		var err error
		if sec, err = GenerateSecret(s.rand); err != nil {
			return err
		}
	}
	v := k.Latest().Version + 1
	k.Versions = append(k.Versions, StoredVersion{KeyVersion: KeyVersion{Version: v, Created: s.now().UTC()}, Secret: sec})
	return nil
}

// ConfigureKey replaces a key's configuration.
func (s *Service) ConfigureKey(ctx context.Context, name string, cfg KeyConfig) (Key, error) {
	return s.UpdateKeyConfig(ctx, name, func(c *KeyConfig) error { *c = cfg; return nil })
}

// UpdateKeyConfig changes a key's configuration with update, which is given
// the current one, in the same read-modify-write as the store's other key
// changes (modifyKey), so that concurrent updates of different fields all
// hold, on any replica. update must depend only on its argument: it may be
// called again on a newer configuration. Its error leaves the key as it
// was.
func (s *Service) UpdateKeyConfig(ctx context.Context, name string, update func(*KeyConfig) error) (Key, error) {
	k, err := s.modifyKey(ctx, name, func(k *StoredKey) (bool, error) {
		if err := k.pending(); err != nil {
			return false, err
		}
		period, exportable := k.Config.RotationPeriod, k.Config.Exportable
		if err := update(&k.Config); err != nil {
			return false, err
		}
		if k.Config.Exportable && !exportable {
			return false, fmt.Errorf("%w: exportable can be set only when the key is created", ErrInvalidConfig)
		}
		k.Config = k.Config.Canonical()
		// Checked only when it changes: a key stored with a shorter
		// period can still have its other fields changed.
		if k.Config.RotationPeriod != period {
			if err := s.checkRotationPeriod(k.Config); err != nil {
				return false, err
			}
		}
		return true, k.Validate()
	})
	if err != nil {
		return Key{}, err
	}
	s.log.Info("key configured", zap.String("key", name))
	return k.Describe(), nil
}

// DeleteKey removes a key whose configuration allows it, at once.
// Everything sealed under it becomes unreadable. A key whose deletion is
// scheduled (ScheduleKeyDeletion) is refused: it goes at its time, or is
// cancelled first.
func (s *Service) DeleteKey(ctx context.Context, name string) error {
	_, err := s.deleteIf(ctx, name, func(k *StoredKey) (bool, error) {
		if err := k.pending(); err != nil {
			return false, err
		}
		if !k.Config.DeletionAllowed {
			return false, fmt.Errorf("%w: %s", ErrDeletionNotAllowed, name)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	s.log.Info("key deleted", zap.String("key", name))
	return nil
}

// RotateDue rotates every key whose latest version is older than its
// rotation period and returns their names. Call it periodically. Replicas
// sharing a store may all call it: the store's revisions let exactly one
// of them add each period's version, and the others, seeing the key no
// longer due when they retry, leave it.
func (s *Service) RotateDue(ctx context.Context) ([]string, error) {
	names, err := s.store.List(ctx)
	if err != nil {
		return nil, err
	}
	var rotated []string
	for _, n := range names {
		if k, err := s.store.Get(ctx, n); err != nil || !s.rotationDue(k) {
			continue
		}
		did := false
		k, err := s.modifyKey(ctx, n, func(k *StoredKey) (bool, error) {
			if !s.rotationDue(k) {
				return false, nil // another caller or replica rotated it
			}
			did = true
			return true, s.addVersion(k, nil)
		})
		if errors.Is(err, ErrKeyNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return rotated, err
		}
		if did {
			s.log.Info("key rotated", zap.String("key", n), zap.Uint32("version", k.Latest().Version))
			rotated = append(rotated, n)
		}
	}
	return rotated, nil
}

func (s *Service) rotationDue(k *StoredKey) bool {
	p := time.Duration(k.Config.RotationPeriod)
	if p <= 0 || k.Latest() == nil || k.Deletion != nil {
		return false
	}
	// A key stored with a shorter period (by a service with a lower
	// minimum) rotates at this one's.
	return s.now().Sub(k.Latest().Created) >= max(p, s.minRotation)
}

// checkRotationPeriod refuses a rotation period below the minimum.
func (s *Service) checkRotationPeriod(c KeyConfig) error {
	if p := time.Duration(c.RotationPeriod); p > 0 && p < s.minRotation {
		// The period is not repeated: it comes from the request.
		return fmt.Errorf("%w: rotation_period is below the minimum of %s (min_rotation_period)", ErrInvalidConfig, s.minRotation)
	}
	return nil
}

// modifyKey is the read-modify-write of a key: it applies change to a copy
// of the stored key and updates the store if change says so, reading again
// and retrying when another writer got there first (ErrConflict). It
// returns the key as stored (or as read, when change made no change).
//
// The store's revisions make this correct across processes. The mutex only
// keeps the writers of this process from failing each other's attempts.
func (s *Service) modifyKey(ctx context.Context, name string, change func(*StoredKey) (bool, error)) (*StoredKey, error) {
	s.admin.Lock()
	defer s.admin.Unlock()
	for attempt := 0; ; attempt++ {
		cur, err := s.key(ctx, name)
		if err != nil {
			return nil, err
		}
		k := cur.Clone()
		write, err := change(k)
		if err != nil {
			return nil, err
		}
		if !write {
			return cur, nil
		}
		err = s.store.Update(ctx, k)
		if err == nil {
			return k, nil
		}
		if err := s.conflictBackoff(ctx, err, attempt); err != nil {
			return nil, err
		}
	}
}

// maxConflictRetries bounds the retries of one read-modify-write; each
// lost attempt means another writer's succeeded.
const maxConflictRetries = 1000

// conflictBackoff returns err unless it is a conflict worth retrying, in
// which case it waits a short random time (so that replicas that lost
// together do not collide again) and returns nil.
func (s *Service) conflictBackoff(ctx context.Context, err error, attempt int) error {
	if !errors.Is(err, ErrConflict) || attempt >= maxConflictRetries {
		return err
	}
	limit := time.Duration(min(attempt+1, 20)) * time.Millisecond
	t := time.NewTimer(time.Duration(mrand.Int64N(int64(limit))))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
