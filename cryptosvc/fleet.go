package cryptosvc

import (
	"context"
	"time"
)

// A FleetStore is a Keystore that replicas share and that also carries a
// report of each replica's host, which every replica publishes and reads
// (the server's GET /speed/fleet). The PostgreSQL store is one; a file or
// memory store serves one process, which has no fleet to show. Reports
// are JSON the store keeps as they are.
type FleetStore interface {
	// PublishHost stores replica's report in place of its last one,
	// stamped with the store's clock.
	PublishHost(ctx context.Context, replica string, report []byte) error
	// Hosts returns the reports published within maxAge of the store's
	// clock, by replica.
	Hosts(ctx context.Context, maxAge time.Duration) ([]PublishedHost, error)
}

// PublishedHost is one replica's report as a FleetStore holds it.
type PublishedHost struct {
	Replica string
	Report  []byte
	// Age is how long ago the report was published, by the store's
	// clock: replicas' clocks need not agree.
	Age time.Duration
}
