package server

import (
	"github.com/gofiber/fiber/v2"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// Key backups (docs/API.md, Key backups): a key created exportable leaves
// the service with its material, sealed, and comes back into this
// keystore or another. Both need the operation keys-backup, which "*"
// does not grant, and both are audited under it, the action saying
// which.

const (
	actionBackup  = "backup"
	actionRestore = "restore"
)

// handleBackupKey answers with the key's backup, sealed under ?under, or
// by default under the backup key when the server has one, else the root
// key.
func (s *Server) handleBackupKey(c *fiber.Ctx, q *call) error {
	under := cryptosvc.SealedUnderRoot
	if s.svc.HasBackupKey() {
		under = cryptosvc.SealedUnderBackupKey
	}
	switch c.Query("under") {
	case api.SealedUnderRoot:
		under = cryptosvc.SealedUnderRoot
	case api.SealedUnderBackupKey:
		under = cryptosvc.SealedUnderBackupKey
	}
	blob, k, err := s.svc.BackupKey(c.UserContext(), q.key, under)
	s.auditRec(c, auditRecord{op: OpKeysBackup, action: actionBackup, key: q.key, version: k.Latest()}, err, nil, nil)
	if err != nil {
		return err
	}
	out := api.KeyBackup{Backup: blob, SealedUnder: under.String(), Key: k.Name, Versions: make([]uint32, len(k.Versions))}
	for i, v := range k.Versions {
		out.Versions[i] = v.Version
	}
	// The answer holds the key's material, sealed: no cache keeps it.
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(&out)
}

// handleRestoreKey creates the key of the path from the body's backup,
// with every version, its configuration and its lifecycle's state.
func (s *Server) handleRestoreKey(c *fiber.Ctx, q *call) error {
	var req api.RestoreKeyRequest
	if err := readJSON(c, q, &req, false); err != nil {
		return err
	}
	defer clear(req.Backup)
	k, err := s.svc.RestoreKey(c.UserContext(), req.Backup, q.key)
	s.auditRec(c, auditRecord{op: OpKeysBackup, action: actionRestore, key: q.key, version: k.Latest()}, err, nil, nil)
	if err != nil {
		return err
	}
	out := toAPIKey(k)
	return c.Status(fiber.StatusCreated).JSON(&out)
}
