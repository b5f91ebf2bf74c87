package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.yaml.in/yaml/v3"

	"github.com/cipherd/cipherd/internal/zaplog"
	"github.com/cipherd/cipherd/server"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sf serveFlags
	sf.register(fs)
	fs.Usage = func() { serveUsage(stderr, fs) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "cipherd serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := checkFailNames(sf.fail); err != nil {
		fmt.Fprintln(stderr, "cipherd serve:", err)
		return 2
	}
	cfg, err := loadConfig(sf.config)
	if err != nil {
		fmt.Fprintln(stderr, "cipherd serve:", err)
		return 2
	}
	if err := cfg.ApplyEnv(os.Getenv); err != nil {
		fmt.Fprintln(stderr, "cipherd serve:", err)
		return 2
	}
	sf.apply(&cfg)
	level, err := zap.ParseAtomicLevel(sf.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "cipherd serve: -log-level:", err)
		return 2
	}
	// JSON logs to standard error through buffers written by a goroutine of
	// their own every second or when full (and at exit): an access and an
	// audit line per request must not cost a write system call each, nor
	// wait while a pipe's reader catches up.
	sink := zaplog.NewSink(stderr, time.Second)
	defer sink.Stop()
	log := zap.New(zapcore.NewCore(zaplog.NewEncoder(zap.NewProductionEncoderConfig()), sink, level),
		zap.ErrorOutput(zapcore.AddSync(stderr)))
	defer log.Sync()
	cfg.Logger = log

	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	srv, err := server.New(startCtx, cfg)
	cancel()
	if err != nil {
		log.Error("start-up failed", zap.Error(err))
		return 1
	}
	if tok := srv.AdminTokenGenerated; tok != "" {
		fmt.Fprintf(stderr, "\n  cipherd admin token (shown once, stored hashed): %s\n\n", tok)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		if err != nil {
			log.Error("serve failed", zap.Error(err))
			return 1
		}
		return 0
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Defaults().ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Error("shutdown", zap.Error(err))
		return 1
	}
	return 0
}

// loadConfig reads the YAML configuration file, if any, rejecting unknown keys.
func loadConfig(path string) (server.Config, error) {
	var cfg server.Config
	if path == "" {
		return cfg, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}
