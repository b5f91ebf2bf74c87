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

	path := filepath.Join(dataDir, "audit.log")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel ends a write early when its writer is killed, so the file
	// may end inside a group none of whose requests was answered. Every
	// answered request's record is on a whole line.
	whole := b[:bytes.LastIndexByte(b, '\n')+1]
	missing := 0
	for _, id := range answered {
		if !bytes.Contains(whole, []byte(`"request_id":"`+id+`"`)) {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d answered requests have no whole audit record after SIGKILL", missing, len(answered))
	}
	t.Logf("%d answered before SIGKILL, %d records, %d bytes of a torn group", len(answered), bytes.Count(b, []byte("\n")), len(b)-len(whole))

	// Started again, cipherd cuts the torn group off, says so, and
	// appends after the last whole record. The kill rarely lands inside a
	// write: when it did not, a torn record stands in for one.
	if len(b) == len(whole) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(`{"time":"2026-12-07T11:`); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	s2, err := rkStart(t, dataDir, env...)
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(after, whole) || len(after) > 0 && after[len(after)-1] != '\n' {
		t.Errorf("after a restart the audit trail is not its whole records followed by whole records: %d bytes, %d before the kill", len(after), len(b))
	}
	// The log is written behind, within a second.
	if !proctest.Poll(10*time.Second, func() bool { return strings.Contains(s2.output(), "the audit trail ended inside a record") }) {
		t.Errorf("the restart cut a torn record without saying so:\n%s", s2.output())
	}
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
