package pgstore

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/pgtest"
)

// Replicas on one database publish their host reports and read each
// other's; a report replaces the replica's last one, reports older than
// the age asked for are left out, and a day-old report goes at the next
// publish.
func TestFleetHosts(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.Database(t)
	root := keystoretest.Secret(t)
	ctx := context.Background()
	a, b := open(t, dsn, &root), open(t, dsn, &root)
	report := func(aead string) []byte { return []byte(`{"aead": "` + aead + `", "cells": [1, 2]}`) }
	for _, p := range []struct {
		s       *Store
		replica string
		aead    string
	}{{a, "a", "aes-128-gcm"}, {b, "b", "chacha20-poly1305"}, {a, "a", "aes-256-gcm"}} {
		if err := p.s.PublishHost(ctx, p.replica, report(p.aead)); err != nil {
			t.Fatal(err)
		}
	}
	hosts, err := b.Hosts(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != 2 || hosts[0].Replica != "a" || hosts[1].Replica != "b" {
		t.Fatalf("hosts %+v, want a and b", hosts)
	}
	for i, want := range []string{"aes-256-gcm", "chacha20-poly1305"} {
		var got, exp any
		json.Unmarshal(hosts[i].Report, &got)
		json.Unmarshal(report(want), &exp)
		if !reflect.DeepEqual(got, exp) {
			t.Errorf("%s's report %s, want %s", hosts[i].Replica, hosts[i].Report, report(want))
		}
		if hosts[i].Age < 0 || hosts[i].Age > time.Minute {
			t.Errorf("%s's report is %s old", hosts[i].Replica, hosts[i].Age)
		}
	}

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE cipherd_hosts SET reported = now() - interval '10 minutes' WHERE replica = 'b'`); err != nil {
		t.Fatal(err)
	}
	if hosts, err := a.Hosts(ctx, 5*time.Minute); err != nil || len(hosts) != 1 || hosts[0].Replica != "a" {
		t.Fatalf("within 5 minutes: %+v, %v; want a alone", hosts, err)
	}
	if hosts, err := a.Hosts(ctx, time.Hour); err != nil || len(hosts) != 2 {
		t.Fatalf("within an hour: %+v, %v; want a and b", hosts, err)
	}

	if _, err := conn.Exec(ctx, `UPDATE cipherd_hosts SET reported = now() - interval '25 hours' WHERE replica = 'b'`); err != nil {
		t.Fatal(err)
	}
	if err := a.PublishHost(ctx, "a", report("aes-256-gcm")); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM cipherd_hosts`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d rows after a publish with a day-old report there, %v; want 1", n, err)
	}

	if err := a.PublishHost(ctx, "a", []byte("not json")); err == nil {
		t.Fatal("a report that is not JSON was stored")
	}
}
