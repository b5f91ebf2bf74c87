package server

import (
	"github.com/gofiber/fiber/v2"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/buildinfo"
)

func (s *Server) handleHealthz(c *fiber.Ctx, q *call) error {
	return c.JSON(fiber.Map{"status": "ok"})
}

// handleReadyz answers 200 once the self-test, the selection and the keys
// are done, and 503 while draining. "keystore" is "ok", or "unavailable"
// while a shared keystore's database cannot be reached: the replica stays
// ready then, since it encrypts and decrypts with the keys it holds, but
// key administration answers 503 keystore_unavailable.
func (s *Server) handleReadyz(c *fiber.Ctx, q *call) error {
	if !s.Ready() {
		return apiError(api.CodeNotReady, "not ready (starting or draining)")
	}
	ks := "ok"
	if h, ok := s.store.(cryptosvc.HealthReporter); ok && h.Health() != nil {
		ks = "unavailable"
	}
	return c.JSON(fiber.Map{"status": "ready", "aead": s.sel.AEADName, "keystore": ks})
}

func (s *Server) handleVersion(c *fiber.Ctx, q *call) error {
	b := buildinfo.Get()
	return c.JSON(&api.Version{Version: b.Version, GoVersion: b.GoVersion, Platform: b.Platform, Revision: b.Revision, BuildID: b.BuildID})
}

// handleAPI lists every route with what it takes and its limits.
func (s *Server) handleAPI(c *fiber.Ctx, q *call) error {
	return c.JSON(s.apiDescription())
}

// handleOpenAPI serves the OpenAPI document with the limits in force.
func (s *Server) handleOpenAPI(c *fiber.Ctx, q *call) error {
	doc, err := s.servedOpenAPI()
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(doc)
}
