package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cipherd/cipherd/client"
	"github.com/cipherd/cipherd/internal/proctest"
)

// BenchmarkClientStream streams one file through a `cipherd serve` on
// loopback with curl -T, with this command (progress on) and with the Go
// client in this process, in turn, so that the three compare in one run:
//
//	go test -run '^$' -bench ClientStream -count 5 ./cmd/cipherd
//
// The file is CIPHERD_BENCH_MB MiB (default 256) of zeros; the answer goes
// to /dev/null. scripts/loadbench.sh measures the same with the server and
// the clients pinned to separate cores.
func BenchmarkClientStream(b *testing.B) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		b.Skip("curl not found")
	}
	mb := 256
	if v, err := strconv.Atoi(os.Getenv("CIPHERD_BENCH_MB")); err == nil && v > 0 {
		mb = v
	}
	url := startServe(b)
	dir := b.TempDir()
	plain, sealed := filepath.Join(dir, "plain"), filepath.Join(dir, "sealed")
	if err := os.Truncate(mustCreate(b, plain), int64(mb)<<20); err != nil {
		b.Fatal(err)
	}
	env := []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN=" + cliToken}
	if _, e, code := crypt(b, env, nil, "encrypt", "--key", "default", "-i", plain, "-o", sealed); code != 0 {
		b.Fatalf("encrypt: exit %d: %s", code, e)
	}
	c, err := client.New(url, client.WithToken(cliToken))
	if err != nil {
		b.Fatal(err)
	}
	for _, op := range []struct{ name, in string }{{"encrypt", plain}, {"decrypt", sealed}} {
		b.Run(op.name+"/curl", func(b *testing.B) {
			b.SetBytes(int64(mb) << 20)
			for b.Loop() {
				cmd := exec.Command(curl, "-sS", "--fail", "-X", "POST", "-H", "Authorization: Bearer "+cliToken,
					"-H", "Content-Type: application/octet-stream", "-T", op.in, "-o", os.DevNull, url+"/v1/"+op.name+"/default")
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("curl: %v\n%s", err, out)
				}
			}
		})
		b.Run(op.name+"/cli", func(b *testing.B) {
			b.SetBytes(int64(mb) << 20)
			for b.Loop() {
				cmd := exec.Command(proctest.Cipherd(b), op.name, "--key", "default", "-progress", "always", "-i", op.in, "-o", os.DevNull)
				cmd.Env = append(os.Environ(), env...)
				cmd.Stderr = io.Discard
				if err := cmd.Run(); err != nil {
					b.Fatalf("cipherd %s: %v", op.name, err)
				}
			}
		})
		b.Run(op.name+"/goclient", func(b *testing.B) {
			b.SetBytes(int64(mb) << 20)
			stream := c.EncryptStream
			if op.name == "decrypt" {
				stream = c.DecryptStream
			}
			for b.Loop() {
				f, err := os.Open(op.in)
				if err != nil {
					b.Fatal(err)
				}
				_, err = stream(context.Background(), "default", io.Discard, f, nil)
				f.Close()
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func mustCreate(b *testing.B, path string) string {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	f.Close()
	return path
}
