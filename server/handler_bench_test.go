//go:build unix

package server

import (
	"context"
	"encoding/base64"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/zaplog"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// BenchmarkHandleEncryptJSON measures the server's own CPU per request: a
// 64-byte JSON encrypt through the whole app (routing, request ID, auth,
// policy, rate limit, strict JSON, per-message key derivation and sealing,
// metrics, access log as JSON at info level through the encoder `cipherd
// serve` uses, audit record), with the HTTP
// parsing and network left out. scripts/loadbench.sh measures the same work
// over loopback.
func BenchmarkHandleEncryptJSON(b *testing.B) {
	body := []byte(`{"plaintext":"` + base64.StdEncoding.EncodeToString(make([]byte, 64)) + `"}`)
	b.ReportMetric(benchEncryptHandler(b, body), "cpu-ns/op")
}

// benchEncryptHandler runs POST /v1/encrypt/default with body through the
// app's handler for b.Loop and returns the CPU time of the whole process
// (garbage collection included) per request: unlike ns/op, it does not grow
// when other programs take turns on the cores.
func benchEncryptHandler(b *testing.B, body []byte) float64 {
	// Audit records are written, not synced: one request at a time, each
	// would wait for a sync of its own, which scripts/auditbench.sh
	// measures under load, where one sync serves many requests.
	return benchHandler(b, benchServer(b, Config{AuditLog: "/dev/null"}), "bench-token", body)
}

// benchServer starts a server with cfg for a benchmark, without
// listening: the admin token bench-token, the memory keystore, and the
// log at info level through the encoder cipherd serve uses.
func benchServer(b *testing.B, cfg Config) *Server {
	logger := zap.New(zapcore.NewCore(zaplog.NewEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.InfoLevel))
	// AES-128-GCM, as scripts/loadbench.sh pins it, so that the two measure
	// the same work.
	cfg.DataDir, cfg.Keystore, cfg.AdminToken, cfg.SkipBenchmark, cfg.AEAD, cfg.Logger = b.TempDir(), cryptosvc.NewMemStore(), "bench-token", true, "aes-128-gcm", logger
	srv, err := New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Shutdown(context.Background()) })
	return srv
}

// benchHandler runs POST /v1/encrypt/default with body and bearer token
// through srv's handler for b.Loop and returns the CPU time per request,
// as benchEncryptHandler.
func benchHandler(b *testing.B, srv *Server, token string, body []byte) float64 {
	h := srv.App().Handler()
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI("/v1/encrypt/default")
	req.Header.SetContentType("application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.SetBody(body)
	var ctx fasthttp.RequestCtx
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		ctx.Init(&req, addr, nil)
		h(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
	return float64(processCPU()-cpu0) / float64(b.N)
}

// processCPU returns the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
