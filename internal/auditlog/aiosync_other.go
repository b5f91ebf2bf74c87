//go:build !(linux && (amd64 || arm64))

package auditlog

import (
	"errors"
	"os"
)

// aioSyncer is Linux's; elsewhere the log syncs with fdatasync.
type aioSyncer struct{}

func newAIOSyncer() (*aioSyncer, error) { return nil, errors.New("no AIO sync on this platform") }

func (s *aioSyncer) sync(*os.File) error { return errAIOUnsupported }

func (s *aioSyncer) close() {}
