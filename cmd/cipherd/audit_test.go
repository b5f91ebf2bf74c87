//go:build cgo && (darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cipherd/cipherd/internal/pgtest"
	"github.com/cipherd/cipherd/internal/proctest"
)

// Every request cipherd serve answered has its audit record on disk, even
// when the process is killed (SIGKILL) with requests in flight: records are
// written before their answers, not behind them. On the file keystore and
// on PostgreSQL.
func TestAuditKilled(t *testing.T) {
	t.Run("file", func(t *testing.T) { auditKilled(t) })
	t.Run("postgres", func(t *testing.T) {
		root := filepath.Join(t.TempDir(), "root.key")
		if err := os.WriteFile(root, []byte(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))), 0o600); err != nil {
			t.Fatal(err)
		}
		auditKilled(t, "CIPHERD_KEYSTORE="+pgtest.Start(t).Database(t), "CIPHERD_ROOT_KEY_FILE="+root)
	})
}

func auditKilled(t *testing.T, env ...string) {
	dataDir := t.TempDir()
	s, err := rkStart(t, dataDir, env...)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		answered []string
		n        atomic.Int64
		wg       sync.WaitGroup
	)
	stop := make(chan struct{})
	for w := range 8 {
		wg.Go(func() {
			c := &http.Client{Timeout: 10 * time.Second}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("kill-%d-%d", w, i)
				req, _ := http.NewRequest("POST", s.url+"/v1/encrypt/default", strings.NewReader(`{"plaintext":"aGVsbG8="}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+rkAdmin)
				req.Header.Set("X-Request-Id", id)
				resp, err := c.Do(req)
				if err != nil {
					return // the server is gone
				}
				resp.Body.Close()
				if resp.StatusCode == 200 {
					mu.Lock()
					answered = append(answered, id)
					mu.Unlock()
					n.Add(1)
				}
			}
		})
	}
	if !proctest.Poll(30*time.Second, func() bool { return n.Load() >= 300 }) {
		t.Fatalf("only %d requests answered in 30 s", n.Load())
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	close(stop)
	wg.Wait()

	b, err := os.ReadFile(filepath.Join(dataDir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	missing := 0
	for _, id := range answered {
		if !bytes.Contains(b, []byte(`"request_id":"`+id+`"`)) {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d answered requests have no audit record after SIGKILL", missing, len(answered))
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("the audit trail ends inside a record")
	}
	t.Logf("%d answered before SIGKILL, %d records", len(answered), bytes.Count(b, []byte("\n")))
}

// SIGHUP reopens the audit trail's path, as logrotate's postrotate
// expects: records before it stay in the renamed file, later ones go to
// the new one.
func TestAuditRotateSIGHUP(t *testing.T) {
	dataDir := t.TempDir()
	s, err := rkStart(t, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	c := rkClient(t, s.url)
	path := filepath.Join(dataDir, "audit.log")
	encrypt := func() {
		t.Helper()
		if _, err := c.Encrypt(t.Context(), "default", []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	encrypt()
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	s.cmd.Process.Signal(syscall.SIGHUP)
	if !proctest.Poll(10*time.Second, func() bool { _, err := os.Stat(path); return err == nil }) {
		t.Fatalf("no new audit file 10 s after SIGHUP\n%s", s.output())
	}
	encrypt()
	old, _ := os.ReadFile(path + ".1")
	cur, _ := os.ReadFile(path)
	if bytes.Count(old, []byte("\n")) != 1 || bytes.Count(cur, []byte("\n")) != 1 {
		t.Errorf("rotated file %q, new file %q: want one record each", old, cur)
	}
}
