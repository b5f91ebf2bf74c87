package server

import (
	"context"
	"sync/atomic"

	"github.com/gofiber/fiber/v2"

	"github.com/cipherd/cipherd/selftest"
)

// speedState holds the latest full benchmark table.
type speedState struct {
	s      *Server
	result atomic.Pointer[selftest.SpeedResult]
}

func newSpeedState(s *Server) *speedState { return &speedState{s: s} }

// runInitial measures the full table once after start-up.
func (sp *speedState) runInitial(ctx context.Context) {}

func (s *Server) handleSpeed(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"selection": s.sel, "kat": s.kat, "table": s.speed.result.Load()})
}

func (s *Server) handleSpeedRun(c *fiber.Ctx) error {
	if err := s.authorize(c, OpSpeedRun, ""); err != nil {
		return err
	}
	return fiber.ErrNotImplemented
}
