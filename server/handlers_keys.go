package server

import (
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/zap"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

func toAPIKey(k cryptosvc.Key) api.Key {
	out := api.Key{Name: k.Name, Created: k.Created, LatestVersion: k.Latest(), KeyConfig: toAPIKeyConfig(k.KeyConfig),
		MinAvailableVersion: k.MinAvailableVersion, DisabledVersions: k.DisabledVersions}
	for _, v := range k.Versions {
		out.Versions = append(out.Versions, api.KeyVersion{Version: v.Version, Created: v.Created})
	}
	if d := k.Deletion; d != nil {
		out.Deletion = &api.KeyDeletion{Scheduled: d.Scheduled, DeleteAt: d.DeleteAt}
	}
	return out
}

func toAPIKeyConfig(c cryptosvc.KeyConfig) api.KeyConfig {
	out := api.KeyConfig{MinDecryptionVersion: c.MinDecryptionVersion, AllowedAEADs: c.AllowedAEADs, AEAD: c.AEAD, DeletionAllowed: c.DeletionAllowed, Exportable: c.Exportable}
	if c.RotationPeriod > 0 {
		out.RotationPeriod = time.Duration(c.RotationPeriod).String()
	}
	return out
}

func fromAPIKeyConfig(c api.KeyConfig) (cryptosvc.KeyConfig, error) {
	out := cryptosvc.KeyConfig{MinDecryptionVersion: c.MinDecryptionVersion, AllowedAEADs: c.AllowedAEADs, AEAD: c.AEAD, DeletionAllowed: c.DeletionAllowed, Exportable: c.Exportable}
	if c.RotationPeriod != "" {
		d, err := time.ParseDuration(c.RotationPeriod)
		if err != nil || d < 0 {
			return out, apiError(api.CodeInvalidConfig, "rotation_period must be a duration such as \"720h\"")
		}
		out.RotationPeriod = cryptosvc.Duration(d)
	}
	return out, nil
}

// handleListKeys lists the keys the caller may read (keys-read on the key).
func (s *Server) handleListKeys(c *fiber.Ctx, q *call) error {
	keys, err := s.svc.ListKeys(c.UserContext())
	if err != nil {
		return err
	}
	out := api.KeyList{Keys: []api.Key{}}
	for _, k := range keys {
		if q.id.allowed(OpKeysRead, k.Name) {
			out.Keys = append(out.Keys, toAPIKey(k))
		}
	}
	return c.JSON(&out)
}

func (s *Server) handleDescribeKey(c *fiber.Ctx, q *call) error {
	key := q.key
	k, err := s.svc.DescribeKey(c.UserContext(), key)
	if err != nil {
		return err
	}
	out := toAPIKey(k)
	if out.Usage, err = s.keyUsage(c, key); err != nil {
		return err
	}
	return c.JSON(&out)
}

// keyUsage returns the use of each version of key, or nil when the
// keystore's backend cannot be read: the key's description does not
// depend on it, as the data path does not.
func (s *Server) keyUsage(c *fiber.Ctx, key string) ([]api.KeyVersionUsage, error) {
	us, err := s.svc.KeyUsage(c.UserContext(), key)
	if errors.Is(err, cryptosvc.ErrUnavailable) {
		s.log.Warn("key usage not read: the keystore is unavailable", zap.String("request_id", requestID(c)), zap.String("key", key), zap.Error(err))
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]api.KeyVersionUsage, len(us))
	for i, u := range us {
		out[i] = api.KeyVersionUsage{Version: u.Version, Sealed: u.Sealed, Opened: u.Opened, LocalSealKeys: u.LocalSealKeys}
		if !u.LastUsed.IsZero() {
			t := u.LastUsed.UTC()
			out[i].LastUsed = &t
		}
	}
	return out, nil
}

func (s *Server) handleCreateKey(c *fiber.Ctx, q *call) error {
	key := q.key
	var req api.CreateKeyRequest
	if err := readJSON(c, q, &req, true); err != nil {
		return err
	}
	cfg, err := fromAPIKeyConfig(req.KeyConfig)
	if err != nil {
		return err
	}
	var k cryptosvc.Key
	if req.Import != nil {
		sec, serr := cryptosvc.NewSecret(req.Import)
		clear(req.Import)
		if serr != nil {
			return serr
		}
		k, err = s.svc.ImportKey(c.UserContext(), key, []cryptosvc.Secret{sec}, cfg)
	} else {
		k, err = s.svc.CreateKey(c.UserContext(), key, cfg)
	}
	s.auditAdmin(c, actionCreate, key, k.Latest(), err)
	if err != nil {
		return err
	}
	out := toAPIKey(k)
	return c.Status(fiber.StatusCreated).JSON(&out)
}

func (s *Server) handleRotateKey(c *fiber.Ctx, q *call) error {
	key := q.key
	var req api.RotateKeyRequest
	if err := readJSON(c, q, &req, true); err != nil {
		return err
	}
	var k cryptosvc.Key
	var err error
	if req.Import != nil {
		sec, serr := cryptosvc.NewSecret(req.Import)
		clear(req.Import)
		if serr != nil {
			return serr
		}
		k, err = s.svc.RotateKeyImport(c.UserContext(), key, sec)
	} else {
		k, err = s.svc.RotateKey(c.UserContext(), key)
	}
	s.auditAdmin(c, actionRotate, key, k.Latest(), err)
	if err != nil {
		return err
	}
	out := toAPIKey(k)
	return c.JSON(&out)
}

func (s *Server) handleConfigureKey(c *fiber.Ctx, q *call) error {
	key := q.key
	// A merge patch (RFC 7396): the fields given change, null resets one,
	// the others keep their values.
	var patch api.KeyConfigPatch
	if err := readJSON(c, q, &patch, false); err != nil {
		return err
	}
	k, err := s.svc.UpdateKeyConfig(c.UserContext(), key, func(cfg *cryptosvc.KeyConfig) error {
		next, err := fromAPIKeyConfig(patch.Apply(toAPIKeyConfig(*cfg)))
		if err != nil {
			return err
		}
		*cfg = next
		return nil
	})
	s.auditAdmin(c, actionConfigure, key, k.Latest(), err)
	if err != nil {
		return err
	}
	out := toAPIKey(k)
	return c.JSON(&out)
}

// handleDeleteKey schedules the key's deletion after ?wait (a Go
// duration, key_deletion_default_wait without one), at least
// key_deletion_min_wait, or deletes it at once for ?wait=0 where
// allow_immediate_key_deletion says so.
func (s *Server) handleDeleteKey(c *fiber.Ctx, q *call) error {
	key := q.key
	wait := s.cfg.KeyDeletionDefaultWait
	if v := c.Query("wait"); v != "" {
		wait, _ = time.ParseDuration(v) // the row let only durations of 0 or more through
	}
	if wait == 0 {
		err := s.deleteNow(c, key)
		s.auditAdmin(c, actionDelete, key, 0, err)
		if err != nil {
			return err
		}
		return c.SendStatus(fiber.StatusNoContent)
	}
	var k cryptosvc.Key
	var err error
	if wait < s.cfg.KeyDeletionMinWait {
		err = apiError(api.CodeInvalidDeletionWait, "the wait must be at least "+s.cfg.KeyDeletionMinWait.String()+" (key_deletion_min_wait), or 0 where immediate deletion is allowed")
	} else {
		k, err = s.svc.ScheduleKeyDeletion(c.UserContext(), key, wait)
	}
	s.auditAdmin(c, actionScheduleDeletion, key, k.Latest(), err)
	if err != nil {
		return err
	}
	out := toAPIKey(k)
	return c.JSON(&out)
}

// deleteNow deletes the key at once, if the configuration allows it.
func (s *Server) deleteNow(c *fiber.Ctx, key string) error {
	if !s.cfg.AllowImmediateKeyDeletion {
		return apiError(api.CodeImmediateDeletionDisallowed, "immediate deletion is not allowed here (allow_immediate_key_deletion); without ?wait=0 the deletion is scheduled")
	}
	return s.svc.DeleteKey(c.UserContext(), key)
}
