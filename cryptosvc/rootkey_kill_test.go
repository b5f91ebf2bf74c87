//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package cryptosvc

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const (
	rkKillDirEnv  = "CIPHERD_TEST_ROTATE_DIR"
	rkKillStepEnv = "CIPHERD_TEST_ROTATE_KILL_AT"
	rkKillOldEnv  = "CIPHERD_TEST_ROTATE_OLD"
	rkKillNewEnv  = "CIPHERD_TEST_ROTATE_NEW"
)

// TestRotateRootKeyKilled runs a rotation in a child process that SIGKILLs
// itself right after durable step N, for every N, on a store with a
// pending write of its own, then checks that the store opens with the old
// or the new root key as the step says and holds every key, and that a
// second rotation with the new key finishes it. Kills at moments between
// steps (inside an atomic write) are what TestFileStoreCrash covers for
// writes; cmd/cipherd's rootkey test kills the real command at random
// moments.
func TestRotateRootKeyKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	const nkeys = 4
	oldRoot, newRoot := ksTestSecret(t), ksTestSecret(t)
	oldP, _ := NewStaticRootKey(&oldRoot, nil)
	newP, _ := NewStaticRootKey(&newRoot, nil)
	for step := 1; step <= nkeys+4; step++ {
		dir := t.TempDir()
		keys := rkStore(t, dir, oldP, "k1", "k2", "k3", "k4")
		cmd := exec.Command(os.Args[0], "-test.run=^TestRotateRootKeyKilledHelper$")
		cmd.Env = append(os.Environ(),
			rkKillDirEnv+"="+dir, fmt.Sprintf("%s=%d", rkKillStepEnv, step),
			rkKillOldEnv+"="+base64.StdEncoding.EncodeToString(oldRoot.Expose()),
			rkKillNewEnv+"="+base64.StdEncoding.EncodeToString(newRoot.Expose()))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("step %d: the helper was not killed: %v\n%s", step, err, stderr.Bytes())
		}
		journal := step <= nkeys+3
		opened := 0
		for _, p := range []RootKeyProvider{oldP, newP} {
			s, err := rkOpen(t, dir, p)
			if err != nil {
				if p == newP || journal {
					t.Fatalf("step %d: %v", step, err)
				}
				continue
			}
			s.Close()
			rkAssertKeys(t, dir, p, keys)
			opened++
		}
		if opened == 0 {
			t.Fatalf("step %d: the store opens with neither root key", step)
		}
		for _, f := range ksFiles(t, dir) {
			if strings.HasPrefix(filepath.Base(f), ksTempPrefix) {
				t.Fatalf("step %d: a partial write %s survived an open", step, f)
			}
		}
		s, err := rkOpen(t, dir, newP)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RotateRootKey(context.Background(), newP); err != nil && journal {
			t.Fatalf("step %d: finishing: %v", step, err)
		}
		s.Close()
		rkAssertKeys(t, dir, newP, keys)
	}
}

// TestRotateRootKeyKilledHelper is the process TestRotateRootKeyKilled
// kills.
func TestRotateRootKeyKilledHelper(t *testing.T) {
	dir := os.Getenv(rkKillDirEnv)
	if dir == "" {
		t.Skip("the helper process of TestRotateRootKeyKilled")
	}
	var step int
	fmt.Sscan(os.Getenv(rkKillStepEnv), &step)
	oldRoot, err1 := LoadRootKey("", rkKillOldEnv)
	newRoot, err2 := LoadRootKey("", rkKillNewEnv)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	newP, _ := NewStaticRootKey(&newRoot, nil)
	s, err := OpenFileStore(dir, FileStoreConfig{RootKey: &oldRoot})
	if err != nil {
		t.Fatal(err)
	}
	ksRotateHook = func(n int) {
		if n == step {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
	if err := s.RotateRootKey(context.Background(), newP); err != nil {
		t.Fatal(err)
	}
	t.Fatal("the rotation ended without being killed")
}
