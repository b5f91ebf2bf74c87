package cryptosvc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
)

// A key's lifecycle besides rotation: its deletion is scheduled ahead and
// can be cancelled until it happens, its versions can be disabled and
// enabled again, and the versions below a minimum can be destroyed (a
// trim). The state is part of the stored key, so every replica of a
// shared store applies it, and each change is one read-modify-write of
// the key (modifyKey), like a rotation.

// PendingDeletionError is the error of an operation on a key whose
// deletion is scheduled. It wraps ErrKeyPendingDeletion.
type PendingDeletionError struct {
	Key      string
	DeleteAt time.Time
}

func (e *PendingDeletionError) Error() string {
	return fmt.Sprintf("cryptosvc: key %s is pending deletion at %s", e.Key, e.DeleteAt.UTC().Format(time.RFC3339Nano))
}

func (e *PendingDeletionError) Unwrap() error { return ErrKeyPendingDeletion }

// VersionError is the error of an operation that needs a version that is
// disabled or destroyed: Err is ErrVersionDisabled or ErrVersionDestroyed,
// which it wraps.
type VersionError struct {
	Key     string
	Version uint32
	Err     error
}

func (e *VersionError) Error() string {
	state := "disabled"
	if errors.Is(e.Err, ErrVersionDestroyed) {
		state = "destroyed"
	}
	return fmt.Sprintf("cryptosvc: key %s version %d is %s", e.Key, e.Version, state)
}

func (e *VersionError) Unwrap() error { return e.Err }

// pending returns a *PendingDeletionError if the key's deletion is
// scheduled.
func (k *StoredKey) pending() error {
	if k.Deletion != nil {
		return &PendingDeletionError{Key: k.Name, DeleteAt: k.Deletion.DeleteAt}
	}
	return nil
}

// IsDisabled reports whether version v is disabled.
func (k *StoredKey) IsDisabled(v uint32) bool {
	_, found := slices.BinarySearch(k.Disabled, v)
	return found
}

// held returns version v, or why the key cannot use it: destroyed by a
// trim, or never made.
func (k *StoredKey) held(v uint32) (*StoredVersion, error) {
	if sv := k.Version(v); sv != nil {
		return sv, nil
	}
	if v != 0 && v < k.firstVersion() {
		return nil, &VersionError{Key: k.Name, Version: v, Err: ErrVersionDestroyed}
	}
	return nil, fmt.Errorf("%w: key %s has no version %d", ErrKeyNotFound, k.Name, v)
}

// sealVersion returns the version that seals new data under k, its latest,
// unless the key is pending deletion or that version is disabled. An older
// version never stands in for a disabled latest one: whoever disabled it
// would find new data sealed under a version they did not choose.
func (k *StoredKey) sealVersion() (*StoredVersion, error) {
	if err := k.pending(); err != nil {
		return nil, err
	}
	v := k.Latest()
	if v == nil {
		return nil, fmt.Errorf("%w: key %s has no version", ErrKeyNotFound, k.Name)
	}
	if k.IsDisabled(v.Version) {
		return nil, &VersionError{Key: k.Name, Version: v.Version, Err: ErrVersionDisabled}
	}
	return v, nil
}

// ScheduleKeyDeletion schedules the deletion of a key whose configuration
// allows it (DeletionAllowed), wait from now. Until then the key is
// refused to every operation (ErrKeyPendingDeletion) but DescribeKey,
// ListKeys and CancelKeyDeletion; DeleteDue deletes it once the time has
// come. wait must be positive: DeleteKey deletes at once. The caller (the
// server) bounds wait.
func (s *Service) ScheduleKeyDeletion(ctx context.Context, name string, wait time.Duration) (Key, error) {
	if wait <= 0 {
		return Key{}, fmt.Errorf("%w: a scheduled deletion needs a positive wait", ErrInvalidConfig)
	}
	k, err := s.modifyKey(ctx, name, func(k *StoredKey) (bool, error) {
		if err := k.pending(); err != nil {
			return false, err
		}
		if !k.Config.DeletionAllowed {
			return false, fmt.Errorf("%w: %s", ErrDeletionNotAllowed, name)
		}
		now := s.now().UTC()
		k.Deletion = &KeyDeletion{Scheduled: now, DeleteAt: now.Add(wait)}
		return true, nil
	})
	if err != nil {
		return Key{}, err
	}
	s.log.Info("key deletion scheduled", zap.String("key", name), zap.Time("delete_at", k.Deletion.DeleteAt))
	return k.Describe(), nil
}

// CancelKeyDeletion cancels a key's scheduled deletion: the key serves
// again as it did, with every version. A key whose deletion is not
// scheduled fails with ErrKeyNotPendingDeletion.
func (s *Service) CancelKeyDeletion(ctx context.Context, name string) (Key, error) {
	k, err := s.modifyKey(ctx, name, func(k *StoredKey) (bool, error) {
		if k.Deletion == nil {
			return false, fmt.Errorf("%w: %s", ErrKeyNotPendingDeletion, name)
		}
		k.Deletion = nil
		return true, nil
	})
	if err != nil {
		return Key{}, err
	}
	s.log.Info("key deletion cancelled", zap.String("key", name))
	return k.Describe(), nil
}

// DeleteDue deletes every key whose scheduled deletion is due and returns
// their names. Call it periodically. Replicas sharing a store may all call
// it: the store's revisions let exactly one of them delete each key, and
// the others, reading again when theirs fails, find it gone, or its
// deletion cancelled, and leave it. Each name is returned by the one call
// that deleted it.
func (s *Service) DeleteDue(ctx context.Context) ([]string, error) {
	names, err := s.store.List(ctx)
	if err != nil {
		return nil, err
	}
	var deleted []string
	for _, n := range names {
		if k, err := s.store.Get(ctx, n); err != nil || !s.deletionDue(k) {
			continue
		}
		did, err := s.deleteIf(ctx, n, func(k *StoredKey) (bool, error) { return s.deletionDue(k), nil })
		if errors.Is(err, ErrKeyNotFound) {
			continue // another replica deleted it
		}
		if err != nil {
			return deleted, err
		}
		if did {
			s.log.Info("key deleted on schedule", zap.String("key", n))
			deleted = append(deleted, n)
		}
	}
	return deleted, nil
}

func (s *Service) deletionDue(k *StoredKey) bool {
	return k.Deletion != nil && !s.now().Before(k.Deletion.DeleteAt)
}

// deleteIf deletes the key named name if ok says so of the key as stored,
// reading again and asking again when another writer got there first. It
// reports whether it deleted the key.
func (s *Service) deleteIf(ctx context.Context, name string, ok func(*StoredKey) (bool, error)) (bool, error) {
	s.admin.Lock()
	defer s.admin.Unlock()
	for attempt := 0; ; attempt++ {
		k, err := s.key(ctx, name)
		if err != nil {
			return false, err
		}
		if yes, err := ok(k); err != nil || !yes {
			return false, err
		}
		err = s.store.Delete(ctx, name, k.Revision)
		if err == nil {
			return true, nil
		}
		if err := s.conflictBackoff(ctx, err, attempt); err != nil {
			return false, err
		}
	}
}

// DisableKeyVersion disables version v of a key: it neither seals (new
// data under the key is refused while v is its latest version) nor opens
// (ErrVersionDisabled) until EnableKeyVersion. Disabling a disabled
// version changes nothing.
func (s *Service) DisableKeyVersion(ctx context.Context, name string, v uint32) (Key, error) {
	return s.setDisabled(ctx, name, v, true)
}

// EnableKeyVersion enables version v of a key again. Enabling an enabled
// version changes nothing.
func (s *Service) EnableKeyVersion(ctx context.Context, name string, v uint32) (Key, error) {
	return s.setDisabled(ctx, name, v, false)
}

func (s *Service) setDisabled(ctx context.Context, name string, v uint32, disabled bool) (Key, error) {
	changed := false
	k, err := s.modifyKey(ctx, name, func(k *StoredKey) (bool, error) {
		changed = false
		if err := k.pending(); err != nil {
			return false, err
		}
		if _, err := k.held(v); err != nil {
			return false, err
		}
		i, found := slices.BinarySearch(k.Disabled, v)
		if found == disabled {
			return false, nil
		}
		if disabled {
			k.Disabled = slices.Insert(k.Disabled, i, v)
		} else if k.Disabled = slices.Delete(k.Disabled, i, i+1); len(k.Disabled) == 0 {
			k.Disabled = nil
		}
		changed = true
		return true, nil
	})
	if err != nil {
		return Key{}, err
	}
	if changed {
		msg := "key version enabled"
		if disabled {
			msg = "key version disabled"
		}
		s.log.Info(msg, zap.String("key", name), zap.Uint32("version", v))
	}
	return k.Describe(), nil
}

// TrimKey destroys the material of the key's versions below minAvailable,
// for good: what they sealed no longer opens anywhere
// (ErrVersionDestroyed). Only retired versions can go: minAvailable must be
// at most the key's MinDecryptionVersion (ErrTrimAboveMinDecryption), and
// above its current minimum (ErrInvalidConfig), which the key then
// describes as MinAvailableVersion.
func (s *Service) TrimKey(ctx context.Context, name string, minAvailable uint32) (Key, error) {
	k, err := s.modifyKey(ctx, name, func(k *StoredKey) (bool, error) {
		if err := k.pending(); err != nil {
			return false, err
		}
		first := k.firstVersion()
		if minAvailable <= first {
			return false, fmt.Errorf("%w: min_available_version %d is not above the key's, %d", ErrInvalidConfig, minAvailable, first)
		}
		if minAvailable > k.Config.MinDecryptionVersion {
			return false, fmt.Errorf("%w: min_available_version %d is above min_decryption_version %d; retire the versions first", ErrTrimAboveMinDecryption, minAvailable, k.Config.MinDecryptionVersion)
		}
		k.Versions = slices.Clone(k.Versions[minAvailable-first:])
		k.MinAvailable = minAvailable
		if k.Disabled = slices.DeleteFunc(k.Disabled, func(v uint32) bool { return v < minAvailable }); len(k.Disabled) == 0 {
			k.Disabled = nil
		}
		return true, nil
	})
	if err != nil {
		return Key{}, err
	}
	s.forgetVersionsBelow(name, minAvailable)
	s.log.Info("key trimmed", zap.String("key", name), zap.Uint32("min_available_version", minAvailable))
	return k.Describe(), nil
}

// forgetVersionsBelow drops the derived keys of the key's versions below
// v from the cache: a trim destroyed them.
func (s *Service) forgetVersionsBelow(name string, v uint32) {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	// Requests in flight may hold an entry: it is dropped, not cleared.
	for ref := range s.cache {
		if ref.name == name && ref.version < v {
			delete(s.cache, ref)
		}
	}
}
