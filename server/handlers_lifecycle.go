package server

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/zap"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// The key lifecycle besides creation, rotation and configuration: the
// cancel of a scheduled deletion (DELETE schedules it, handleDeleteKey),
// versions disabled and enabled, the trim of retired versions, and the
// deletions that come due, which every replica looks for and one does.

// The actions of key administration, in its audit records: every one is
// the operation keys-admin, and the action says which change it was.
const (
	actionCreate           = "create"
	actionRotate           = "rotate"
	actionConfigure        = "configure"
	actionDelete           = "delete"
	actionScheduleDeletion = "schedule-deletion"
	actionCancelDeletion   = "cancel-deletion"
	actionDeleteDue        = "delete-due"
	actionDisableVersion   = "disable-version"
	actionEnableVersion    = "enable-version"
	actionTrim             = "trim"
)

// systemIdentity is the identity of the records of what a replica does on
// its own: the deletions that come due.
const systemIdentity = "cipherd"

func (s *Server) handleCancelDeletion(c *fiber.Ctx, q *call) error {
	k, err := s.svc.CancelKeyDeletion(c.UserContext(), q.key)
	s.auditAdmin(c, actionCancelDeletion, q.key, k.Latest(), err)
	if err != nil {
		return err
	}
	out := toAPIKey(k)
	return c.JSON(&out)
}

func (s *Server) handleDisableVersion(c *fiber.Ctx, q *call) error {
	return s.setVersionDisabled(c, q, true)
}

func (s *Server) handleEnableVersion(c *fiber.Ctx, q *call) error {
	return s.setVersionDisabled(c, q, false)
}

func (s *Server) setVersionDisabled(c *fiber.Ctx, q *call, disabled bool) error {
	v, err := versionParam(q.param)
	if err != nil {
		return err
	}
	var k cryptosvc.Key
	action := actionEnableVersion
	if disabled {
		action = actionDisableVersion
		k, err = s.svc.DisableKeyVersion(c.UserContext(), q.key, v)
	} else {
		k, err = s.svc.EnableKeyVersion(c.UserContext(), q.key, v)
	}
	s.auditAdmin(c, action, q.key, v, err)
	if err != nil {
		return err
	}
	out := toAPIKey(k)
	return c.JSON(&out)
}

// versionParam parses a path's {version}: a version number, 1 or more.
func versionParam(p string) (uint32, error) {
	v, err := strconv.ParseUint(p, 10, 32)
	if err != nil || v == 0 {
		return 0, apiError(api.CodeBadRequest, "the path's version must be a version number: 1, 2, 3…")
	}
	return uint32(v), nil
}

// handleTrimKey destroys the versions below the body's
// min_available_version, once the body confirms it with the key's name:
// a trim cannot be undone.
func (s *Server) handleTrimKey(c *fiber.Ctx, q *call) error {
	var req api.TrimKeyRequest
	if err := readJSON(c, q, &req, false); err != nil {
		return err
	}
	var k cryptosvc.Key
	var err error
	if req.Confirm != q.key {
		err = apiError(api.CodeTrimNotConfirmed, "a trim destroys versions for good: confirm must be the key's name")
	} else {
		k, err = s.svc.TrimKey(c.UserContext(), q.key, req.MinAvailableVersion)
	}
	s.auditAdmin(c, actionTrim, q.key, req.MinAvailableVersion, err)
	if err != nil {
		return err
	}
	out := toAPIKey(k)
	return c.JSON(&out)
}

// deleteDue deletes the keys whose scheduled deletion has come, as one of
// the replicas that look for them, and records each deletion this replica
// did in the audit trail, as the identity "cipherd".
func (s *Server) deleteDue(ctx context.Context) {
	deleted, err := s.svc.DeleteDue(ctx)
	if err != nil && !errors.Is(err, cryptosvc.ErrReadOnly) && !errors.Is(err, cryptosvc.ErrUnavailable) {
		s.log.Warn("scheduled deletion failed", zap.Error(err))
	}
	for _, name := range deleted {
		s.auditSystem(actionDeleteDue, name)
	}
	if len(deleted) > 0 {
		s.log.Info("keys deleted on schedule", zap.Strings("keys", deleted))
	}
}

// auditSystem writes the record of a key change the replica made on its
// own, with a request id of its own for the log line that mentions it.
func (s *Server) auditSystem(action, key string) {
	var text [24]byte
	newRequestID(&text)
	id := string(text[:])
	a := auditRecord{op: OpKeysAdmin, action: action, key: key, outcome: "ok"}
	rec := s.appendAuditRecord(nil, nil, id, systemIdentity, &a, nil, nil)
	err := s.audits.Append(rec)
	putAuditBuf(rec)
	if err != nil {
		// The key is gone whatever the trail says: there is no request
		// to refuse, so the failure is counted and logged.
		s.met.auditFailures.Add(1)
		s.log.Error("audit record of a scheduled deletion not written", zap.String("request_id", id), zap.String("key", key), zap.Error(err))
	}
}

// validWait reports whether v is a wait a deletion may ask for: a Go
// duration of 0 or more. Its bounds are the configuration's, checked by
// the handler, which says what they are.
func validWait(v string) bool {
	d, err := time.ParseDuration(v)
	return err == nil && d >= 0
}

// keysPendingDeletion counts the keys whose deletion is scheduled, from
// the keystore's memory.
func (s *Server) keysPendingDeletion() int {
	if s.store == nil { // a Server some tests build without New
		return 0
	}
	ctx := context.Background()
	names, err := s.store.List(ctx)
	if err != nil {
		return 0
	}
	n := 0
	for _, name := range names {
		if k, err := s.store.Get(ctx, name); err == nil && k.Deletion != nil {
			n++
		}
	}
	return n
}
