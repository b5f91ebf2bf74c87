//go:build linux && (amd64 || arm64)

package auditlog

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// On Linux a file's groups are synced through AIO, not fdatasync, and
// stay whole and in order.
func TestAIOSync(t *testing.T) {
	l, path := openTemp(t)
	for i := range 3 {
		if err := l.Append([]byte(`{"i":` + string(rune('0'+i)) + `}`)); err != nil {
			t.Fatal(err)
		}
	}
	l.fmu.Lock()
	aio := l.aio != nil
	l.fmu.Unlock()
	if !aio {
		t.Fatal("the log fell back to fdatasync: the kernel refused IOCB_CMD_FDSYNC")
	}
	if got := lines(t, path); len(got) != 3 || got[2] != `{"i":2}` {
		t.Errorf("lines %q", got)
	}
}

// A sync whose completion cannot be read fails its group, and the log
// gives AIO up: the next groups are synced with fdatasync.
func TestAIOSyncLost(t *testing.T) {
	l, path := openTemp(t)
	if err := l.Append([]byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	l.fmu.Lock()
	if l.aio == nil {
		l.fmu.Unlock()
		t.Skip("the kernel refused IOCB_CMD_FDSYNC")
	}
	// The kernel signals the eventfd, which stays open, and the log reads
	// a closed file in its place.
	closed, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	efd := l.aio.efd
	defer efd.Close()
	l.aio.efd = closed
	l.fmu.Unlock()
	if err := l.Append([]byte(`{"n":2}`)); !errors.Is(err, errAIOBroken) || strings.Count(err.Error(), "auditlog:") != 1 {
		t.Fatalf("append with the completion unreadable: %v, want errAIOBroken, prefixed once", err)
	}
	if err := l.Append([]byte(`{"n":3}`)); err != nil {
		t.Fatal(err)
	}
	l.fmu.Lock()
	aio := l.aio != nil
	l.fmu.Unlock()
	if aio {
		t.Error("the log kept AIO after losing a completion")
	}
	if got := strings.Join(lines(t, path), " "); got != `{"n":1} {"n":3}` {
		t.Errorf("lines %s, want the failed group cut", got)
	}
}
