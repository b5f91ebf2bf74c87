package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/cryptosvc/keystore"
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
	hup, stopHup := notifyReload()
	defer stopHup()
	// The configuration as the file, the environment and the flags give
	// it; made again on every reload.
	var fileSum [sha256.Size]byte
	load := func() (server.Config, error) {
		cfg, sum, err := readConfig(sf.config)
		fileSum = sum
		if err != nil {
			return cfg, err
		}
		if err := cfg.ApplyEnv(os.Getenv); err != nil {
			return cfg, err
		}
		sf.apply(&cfg)
		return cfg, nil
	}
	cfg, err := load()
	if err != nil {
		fmt.Fprintln(stderr, "cipherd serve:", err)
		return 2
	}
	level, err := zap.ParseAtomicLevel(cfg.Defaults().LogLevel)
	if err != nil {
		fmt.Fprintln(stderr, "cipherd serve: log level:", err)
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

	// The binary opens the keystore and hands the server the live store;
	// the store outlives the server, and closes after its Shutdown.
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	defaulted := cfg.Defaults()
	sc := storeSettings(&defaulted)
	sc.Logger = log
	store, err := keystore.Open(startCtx, sc)
	if err != nil {
		log.Error("start-up failed", zap.Error(err))
		return 1
	}
	defer func() {
		if err := store.Close(); err != nil {
			log.Error("closing the keystore", zap.Error(err))
		}
	}()
	cfg.Keystore = store.Keystore
	if defaulted.BackupKeyFile != "" {
		bk, err := cryptosvc.LoadBackupKey(defaulted.BackupKeyFile)
		if err != nil {
			log.Error("start-up failed", zap.Error(err))
			return 1
		}
		cfg.BackupKey = &bk
	}
	srv, err := server.New(startCtx, cfg)
	cancel()
	if err != nil {
		log.Error("start-up failed", zap.Error(err))
		return 1
	}
	store.WatchRotation(log)
	if tok := srv.AdminTokenGenerated; tok != "" {
		fmt.Fprintf(stderr, "\n  cipherd admin token (shown once, stored hashed): %s\n\n", tok)
	}
	rl := &reloader{file: sf.config, load: load, apply: srv.Reload, reopen: srv.ReopenAuditLog, failed: srv.CountReloadFailure, level: level, log: log, sum: fileSum}
	rctx, stopReload := context.WithCancel(ctx)
	defer stopReload()
	go rl.run(rctx, hup)
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	shutdown := func() error {
		sctx, cancel := context.WithTimeout(context.Background(), cfg.Defaults().ShutdownTimeout)
		defer cancel()
		return srv.Shutdown(sctx)
	}
	select {
	case err := <-errc:
		shutdown() // its background work ends before the store closes
		if err != nil {
			log.Error("serve failed", zap.Error(err))
			return 1
		}
		return 0
	case <-ctx.Done():
	}
	if err := shutdown(); err != nil {
		log.Error("shutdown", zap.Error(err))
		return 1
	}
	return 0
}
