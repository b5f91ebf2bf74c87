//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package cryptosvc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFileStoreCrash kills a process writing a FileStore with SIGKILL at
// random moments, then checks that the store opens and that no completed
// rotation was lost or altered: the atomic write (temporary file, fsync,
// rename, fsync of the directory) leaves either the old or the new file.
// SIGKILL loses the process, not the page cache: this tests atomicity and
// lock release, not durability across power loss, which rests on the
// fsyncs.

const (
	ksCrashDirEnv  = "CIPHERD_TEST_CRASH_DIR"
	ksCrashRootEnv = "CIPHERD_TEST_CRASH_ROOT_KEY"
	ksCrashReady   = "kscrash: running"
)

// ksCrashSecret is version n's material, which both processes derive.
func ksCrashSecret(label string, n int) Secret {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s%d", label, n))
	s, _ := NewSecret(sum[:])
	return s
}

func TestFileStoreCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	const rounds = 25
	dir := t.TempDir()
	root := ksTestSecret(t)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d", seed)

	prev, partial := 0, 0
	start := time.Now()
	for round := range rounds {
		ksCrashRound(t, dir, &root, time.Duration(5+rng.IntN(56))*time.Millisecond)

		for _, f := range ksFiles(t, dir) {
			if strings.HasPrefix(filepath.Base(f), ksTempPrefix) {
				partial++ // the kill interrupted a write
				break
			}
		}
		s, err := OpenFileStore(dir, FileStoreConfig{RootKey: &root})
		if err != nil {
			t.Fatalf("round %d: reopening after SIGKILL: %v", round, err)
		}
		for _, f := range ksFiles(t, dir) {
			if strings.HasPrefix(filepath.Base(f), ksTempPrefix) {
				t.Fatalf("round %d: %s survived open", round, f)
			}
		}
		k, err := s.Get(context.Background(), "rot")
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		n := len(k.Versions)
		if n < prev {
			t.Fatalf("round %d: the rotated key went back from %d to %d versions", round, prev, n)
		}
		for i := range k.Versions {
			want := ksCrashSecret("v", i+1)
			if !k.Versions[i].Secret.Equal(&want) {
				t.Fatalf("round %d: version %d's material changed", round, i+1)
			}
		}
		if sc, err := s.Get(context.Background(), "scratch"); err == nil {
			want := ksCrashSecret("scratch", 1)
			if len(sc.Versions) != 1 || !sc.Versions[0].Secret.Equal(&want) {
				t.Fatalf("round %d: the scratch key is wrong", round)
			}
		} else if !errors.Is(err, ErrKeyNotFound) {
			t.Fatal(err)
		}
		prev = n
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d rounds in %v: %d versions written; %d kills left a partial write to clean up",
		rounds, time.Since(start).Round(time.Millisecond), prev, partial)
	if prev < 2 {
		t.Fatalf("the helper made no progress (%d versions)", prev)
	}
}

// ksCrashRound runs the helper until it reports, lets it write for delay,
// and kills it.
func ksCrashRound(t *testing.T, dir string, root *Secret, delay time.Duration) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFileStoreCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), ksCrashDirEnv+"="+dir, ksCrashRootEnv+"="+hex.EncodeToString(root.Expose()))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == ksCrashReady {
				ready <- true
				return
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			cmd.Wait()
			t.Fatalf("the helper exited before writing: %v\n%s", cmd.ProcessState, stderr.Bytes())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the helper did not start\n%s", stderr.Bytes())
	}
	time.Sleep(delay)
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.Exited() {
		t.Fatalf("the helper ended on its own (%v) instead of being killed\n%s", err, stderr.Bytes())
	}
}

// TestFileStoreCrashHelper is the process TestFileStoreCrash kills: it
// rotates "rot" (one more version per Update) and creates and deletes
// "scratch", forever.
func TestFileStoreCrashHelper(t *testing.T) {
	dir := os.Getenv(ksCrashDirEnv)
	if dir == "" {
		t.Skip("the helper process of TestFileStoreCrash")
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "kscrash:", err)
		os.Exit(2)
	}
	root, err := LoadRootKey("", ksCrashRootEnv)
	if err != nil {
		fail(err)
	}
	s, err := OpenFileStore(dir, FileStoreConfig{RootKey: &root})
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	version := func(k *StoredKey, label string) {
		n := len(k.Versions) + 1
		k.Versions = append(k.Versions, StoredVersion{
			KeyVersion: KeyVersion{Version: uint32(n), Created: time.Now()},
			Secret:     ksCrashSecret(label, n),
		})
	}
	var rot *StoredKey
	if k, err := s.Get(ctx, "rot"); err == nil {
		rot = k.Clone()
	} else {
		rot = &StoredKey{Name: "rot", Created: time.Now()}
		version(rot, "v")
		if err := s.Create(ctx, rot); err != nil {
			fail(err)
		}
	}
	current := func(name string) *StoredKey {
		k, err := s.Get(ctx, name)
		if err != nil {
			fail(err)
		}
		return k.Clone()
	}
	_, err = s.Get(ctx, "scratch")
	haveScratch := err == nil
	fmt.Println(ksCrashReady)

	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		rot = current("rot")
		version(rot, "v")
		if err := s.Update(ctx, rot); err != nil {
			fail(err)
		}
		if haveScratch {
			err = s.Delete(ctx, "scratch", current("scratch").Revision)
		} else {
			sc := &StoredKey{Name: "scratch", Created: time.Now()}
			version(sc, "scratch")
			err = s.Create(ctx, sc)
		}
		if err != nil {
			fail(err)
		}
		haveScratch = !haveScratch
	}
	fail(errors.New("not killed within 30 s"))
}
