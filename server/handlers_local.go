package server

import (
	"errors"

	"github.com/gofiber/fiber/v2"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// Local sealing and opening (cryptosvc/local.go): the service hands a
// client the key material to seal messages itself, and the key of one
// message to open it itself. Both are audited like the operations they
// stand for, under operations of their own, so that a policy may allow
// decrypt on the service and refuse local opening, or the reverse.

// handleSealKey answers a fresh sealing key and the operator's limits of
// its use.
func (s *Server) handleSealKey(c *fiber.Ctx, q *call) error {
	var req struct{}
	if err := readJSON(c, q, &req, true); err != nil {
		return err
	}
	sk, err := s.svc.NewSealingKey(c.UserContext(), q.key)
	s.audit(c, OpEncryptLocal, q.key, sk.Info, 0, err)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(&api.SealingKeyResponse{Header: sk.Header, DataKey: sk.DataKey, KeyVersion: sk.Info.Version, AEAD: sk.Info.AEAD.String(),
		Limits: api.LocalLimits{MaxAge: s.cfg.LocalSealMaxAge.String(), MaxMessages: s.cfg.LocalSealMaxMessages, MaxBytes: s.cfg.LocalSealMaxBytes}})
}

var errStartRequired = apiError(api.CodeBadRequest, "start is required (base64): the message's header, salt and commitment")

// handleMessageKey answers the key of each message whose start it is
// given: one, or a batch.
func (s *Server) handleMessageKey(c *fiber.Ctx, q *call) error {
	key := q.key
	req, err := readDataRequest(c, q, "start")
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	derive := func(it dataItem) (api.MessageKeyResult, cryptosvc.Info, int, error) {
		if it.data == nil {
			return api.MessageKeyResult{}, cryptosvc.Info{}, 0, errStartRequired
		}
		mk, err := s.svc.MessageKey(c.UserContext(), key, it.data, it.context)
		if err != nil {
			if errors.Is(err, cryptosvc.ErrAuthFailed) {
				s.met.decryptFailure()
			}
			return api.MessageKeyResult{}, mk.Info, len(it.data), err
		}
		return api.MessageKeyResult{Key: mk.Key, Nonce: mk.Nonce[:], KeyVersion: mk.Info.Version, AEAD: mk.Info.AEAD.String(), Reference: it.reference}, mk.Info, len(it.data), nil
	}
	return respondItems(s, c, OpDecryptLocal, key, &req, derive, func(it dataItem, e *api.Error) api.MessageKeyResult {
		return api.MessageKeyResult{Reference: it.reference, Error: e}
	})
}
