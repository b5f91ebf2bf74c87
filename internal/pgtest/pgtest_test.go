package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// The cluster answers queries, and comes back after a kill -9.
func TestServer(t *testing.T) {
	s := Start(t)
	dsn := s.Database(t)
	ctx := context.Background()
	query := func() int {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, "SELECT 40 + 2").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := query(); n != 42 {
		t.Fatalf("SELECT 40 + 2 = %d", n)
	}
	s.Kill(t)
	if _, err := pgx.Connect(ctx, dsn); err == nil {
		t.Fatal("connected to a killed server")
	}
	s.Restart(t)
	if n := query(); n != 42 {
		t.Fatalf("after restart: %d", n)
	}
}

// Kill leaves no process of the cluster behind, even while clients connect
// as fast as they can, each connection forking a backend: one forked after
// Kill listed the postmaster's children would live on as an orphan.
func TestKillLeavesNoBackend(t *testing.T) {
	s := Start(t)
	dsn := s.Database(t)
	for round := range 5 {
		if round > 0 {
			s.Restart(t)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var dialled atomic.Int64
		for range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					if conn, err := pgx.Connect(ctx, dsn); err == nil {
						dialled.Add(1)
						conn.Close(ctx)
					}
					cancel()
				}
			})
		}
		for dialled.Load() < 20 {
			time.Sleep(time.Millisecond)
		}
		s.Kill(t)
		left := processesIn(filepath.Join(s.dir, "data"))
		close(stop)
		wg.Wait()
		if len(left) > 0 {
			t.Fatalf("round %d: %d processes of the killed cluster still run: %v", round, len(left), left)
		}
	}
}

// processesIn lists the live processes whose working folder is dir:
// PostgreSQL's processes all work in the data folder.
func processesIn(dir string) []int {
	return processes(func(pid int) bool {
		cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		return err == nil && cwd == dir && alive(pid)
	})
}
