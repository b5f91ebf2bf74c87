package pgtest

import (
	"context"
	"testing"

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
