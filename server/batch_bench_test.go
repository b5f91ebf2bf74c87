//go:build unix

package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net"
	"testing"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cipherd/cipherd/internal/zaplog"
)

// BenchmarkHandleEncryptBatch is BenchmarkHandleEncryptJSON for a batch of
// 100 items of 64 bytes: the server's CPU per batch item (cpu-ns/item) is
// what the batch route costs beside the single-item route.
func BenchmarkHandleEncryptBatch(b *testing.B) {
	const items = 100
	logger := zap.New(zapcore.NewCore(zaplog.NewEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.InfoLevel))
	srv, err := New(context.Background(), Config{DataDir: b.TempDir(), AdminToken: "bench-token", SkipBenchmark: true, AEAD: "aes-128-gcm", Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Shutdown(context.Background()) })
	h := srv.App().Handler()
	item := `{"plaintext":"` + base64.StdEncoding.EncodeToString(make([]byte, 64)) + `"}`
	body := []byte(`{"items":[` + item + string(bytes.Repeat([]byte(","+item), items-1)) + `]}`)
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI("/v1/encrypt/default")
	req.Header.SetContentType("application/json")
	req.Header.Set("Authorization", "Bearer bench-token")
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
	cpu := float64(processCPU() - cpu0)
	b.ReportMetric(cpu/float64(b.N), "cpu-ns/op")
	b.ReportMetric(cpu/float64(b.N)/items, "cpu-ns/item")
}
