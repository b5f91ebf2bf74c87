package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.yaml.in/yaml/v3"

	"github.com/cipherd/cipherd/server"
)

// configPoll is how often the configuration file is checked for a change,
// as the TLS files are: a Kubernetes ConfigMap or Secret update replaces
// the file (by a symbolic link swap) and sends no signal.
const configPoll = 5 * time.Second

// reloader applies the configuration again while the server runs: on
// SIGHUP, and when the configuration file's contents change. A
// configuration that does not load, or that the server refuses, changes
// nothing; the log says why.
type reloader struct {
	file   string                                // the configuration file; "" for none
	load   func() (server.Config, error)         // the file, the environment and the flags, as at start-up
	apply  func(server.Config) ([]string, error) // (*server.Server).Reload
	reopen func() error                          // (*server.Server).ReopenAuditLog; nil for none
	failed func()                                // (*server.Server).CountReloadFailure, for a configuration that does not load; nil for none
	level  zap.AtomicLevel
	log    *zap.Logger
	sum    [sha256.Size]byte // of the file last loaded (or tried)
}

// notifyReload starts catching SIGHUP, which would otherwise end the
// process. Called before start-up, so that a SIGHUP during it waits for
// the server instead.
func notifyReload() (hup chan os.Signal, stop func()) {
	hup = make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return hup, func() { signal.Stop(hup) }
}

// run reloads on every signal from hup and every change of the file until
// ctx ends.
func (r *reloader) run(ctx context.Context, hup <-chan os.Signal) {
	t := time.NewTicker(configPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			// The audit trail's file is reopened first, as log rotation
			// (logrotate's postrotate) expects of SIGHUP.
			if r.reopen != nil {
				if err := r.reopen(); err != nil {
					r.log.Error("reopening the audit trail failed: no record is written until a SIGHUP reopens it; audited requests are refused, or with audit_fail_open answered without one", zap.Error(err))
				} else {
					r.log.Info("audit trail reopened")
				}
			}
			r.reload("SIGHUP")
		case <-t.C:
			if r.file == "" {
				continue
			}
			if b, err := os.ReadFile(r.file); err == nil && sha256.Sum256(b) != r.sum {
				r.reload("file changed")
			}
		}
	}
}

// reload loads the configuration and applies it.
func (r *reloader) reload(why string) {
	if r.file != "" {
		if b, err := os.ReadFile(r.file); err == nil {
			r.sum = sha256.Sum256(b) // a broken file is reported once, not at every poll
		}
	}
	cfg, err := r.load()
	var restart []string
	if err == nil {
		restart, err = r.apply(cfg) // counts its own outcome
	} else if r.failed != nil {
		r.failed()
	}
	if err != nil {
		r.log.Error("configuration reload failed; the configuration in service stays", zap.String("trigger", why), zap.Error(err))
		return
	}
	if l, err := zapcore.ParseLevel(cfg.Defaults().LogLevel); err == nil && l != r.level.Level() {
		r.level.SetLevel(l) // Reload validated it
		r.log.Info("log level changed", zap.String("log_level", l.String()))
	}
	if len(restart) > 0 {
		r.log.Warn("changed settings take effect on the next start only", zap.Strings("settings", restart))
	}
}

// readConfig reads the YAML configuration file, if any, rejecting unknown
// keys, and returns it with the SHA-256 of its contents.
func readConfig(path string) (server.Config, [sha256.Size]byte, error) {
	var cfg server.Config
	if path == "" {
		return cfg, [sha256.Size]byte{}, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, [sha256.Size]byte{}, err
	}
	sum := sha256.Sum256(b)
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, sum, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, sum, nil
}
