//go:build linux && (amd64 || arm64)

package auditlog

import (
	"path/filepath"
	"testing"
)

// On Linux a file's groups are synced through AIO, not fdatasync, and
// stay whole and in order.
func TestAIOSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
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
