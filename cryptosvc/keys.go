package cryptosvc

import (
	"context"
	"fmt"
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
	k := &StoredKey{Name: name, Created: now, Config: cfg}
	for i, sec := range secrets {
		k.Versions = append(k.Versions, StoredVersion{KeyVersion: KeyVersion{Version: uint32(i + 1), Created: now}, Secret: sec})
	}
	if err := k.Validate(); err != nil {
		return Key{}, err
	}
	s.admin.Lock()
	defer s.admin.Unlock()
	if err := s.store.Create(ctx, k); err != nil {
		return Key{}, err
	}
	s.log.Info("key created", zap.String("key", name), zap.Int("versions", len(secrets)))
	return k.Describe(), nil
}

// DescribeKey returns a key's metadata, never its material.
func (s *Service) DescribeKey(ctx context.Context, name string) (Key, error) {
	k, err := s.store.Get(ctx, name)
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
	s.admin.Lock()
	defer s.admin.Unlock()
	return s.rotateLocked(ctx, name)
}

func (s *Service) rotateLocked(ctx context.Context, name string) (Key, error) {
	cur, err := s.store.Get(ctx, name)
	if err != nil {
		return Key{}, err
	}
	secret, err := GenerateSecret(s.rand)
	if err != nil {
		return Key{}, err
	}
	k := cur.Clone()
	v := uint32(len(k.Versions) + 1)
	k.Versions = append(k.Versions, StoredVersion{KeyVersion: KeyVersion{Version: v, Created: s.now().UTC()}, Secret: secret})
	if err := s.store.Update(ctx, k); err != nil {
		return Key{}, err
	}
	s.log.Info("key rotated", zap.String("key", name), zap.Uint32("version", v))
	return k.Describe(), nil
}

// ConfigureKey replaces a key's configuration.
func (s *Service) ConfigureKey(ctx context.Context, name string, cfg KeyConfig) (Key, error) {
	return s.UpdateKeyConfig(ctx, name, func(c *KeyConfig) error { *c = cfg; return nil })
}

// UpdateKeyConfig changes a key's configuration with update, which is given
// the current one, in the same read-modify-write as the store's other key
// changes, so that concurrent updates of different fields all hold. update
// must depend only on its argument: it may be called again on a newer
// configuration. Its error leaves the key as it was.
func (s *Service) UpdateKeyConfig(ctx context.Context, name string, update func(*KeyConfig) error) (Key, error) {
	s.admin.Lock()
	defer s.admin.Unlock()
	cur, err := s.store.Get(ctx, name)
	if err != nil {
		return Key{}, err
	}
	k := cur.Clone()
	if err := update(&k.Config); err != nil {
		return Key{}, err
	}
	if err := k.Validate(); err != nil {
		return Key{}, err
	}
	if err := s.store.Update(ctx, k); err != nil {
		return Key{}, err
	}
	s.log.Info("key configured", zap.String("key", name))
	return k.Describe(), nil
}

// DeleteKey removes a key whose configuration allows it. Everything sealed
// under it becomes unreadable.
func (s *Service) DeleteKey(ctx context.Context, name string) error {
	s.admin.Lock()
	defer s.admin.Unlock()
	k, err := s.store.Get(ctx, name)
	if err != nil {
		return err
	}
	if !k.Config.DeletionAllowed {
		return fmt.Errorf("%w: %s", ErrDeletionNotAllowed, name)
	}
	if err := s.store.Delete(ctx, name); err != nil {
		return err
	}
	s.log.Info("key deleted", zap.String("key", name))
	return nil
}

// RotateDue rotates every key whose latest version is older than its
// rotation period and returns their names. Call it periodically.
func (s *Service) RotateDue(ctx context.Context) ([]string, error) {
	names, err := s.store.List(ctx)
	if err != nil {
		return nil, err
	}
	now := s.now()
	var rotated []string
	for _, n := range names {
		k, err := s.store.Get(ctx, n)
		if err != nil || k.Config.RotationPeriod <= 0 || k.Latest() == nil {
			continue
		}
		if now.Sub(k.Latest().Created) < time.Duration(k.Config.RotationPeriod) {
			continue
		}
		s.admin.Lock()
		// Check again under the lock: another caller may have rotated it.
		if cur, err := s.store.Get(ctx, n); err == nil && now.Sub(cur.Latest().Created) >= time.Duration(cur.Config.RotationPeriod) {
			if _, err := s.rotateLocked(ctx, n); err != nil {
				s.admin.Unlock()
				return rotated, err
			}
			rotated = append(rotated, n)
		}
		s.admin.Unlock()
	}
	return rotated, nil
}
