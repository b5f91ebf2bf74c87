package pgstore

import (
	"context"
	"time"

	"github.com/cipherd/cipherd/cryptosvc"
)

// Host reports (cryptosvc.FleetStore) live in cipherd_hosts, a row per
// replica that it replaces at every report, stamped with the database's
// clock so that ages do not depend on the replicas' clocks. A replica's
// publish also removes rows a day old: replicas that are gone for good,
// which the age limit of Hosts already hides.

var _ cryptosvc.FleetStore = (*Store)(nil)

// hostsKept is how long a replica's last report stays in the table.
const hostsKept = 24 * time.Hour

const publishHost = `
WITH gone AS (DELETE FROM cipherd_hosts WHERE reported < now() - make_interval(secs => $3) AND replica <> $1)
INSERT INTO cipherd_hosts (replica, report, reported) VALUES ($1, $2, now())
ON CONFLICT (replica) DO UPDATE SET report = EXCLUDED.report, reported = EXCLUDED.reported`

// PublishHost stores replica's report in place of its last one.
func (s *Store) PublishHost(ctx context.Context, replica string, report []byte) error {
	if s.snap.Load() == nil {
		return cryptosvc.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, s.opTO)
	defer cancel()
	_, err := s.pool.Exec(ctx, publishHost, replica, string(report), hostsKept.Seconds())
	return classify(err)
}

// Hosts returns the reports published within maxAge, by replica.
func (s *Store) Hosts(ctx context.Context, maxAge time.Duration) ([]cryptosvc.PublishedHost, error) {
	if s.snap.Load() == nil {
		return nil, cryptosvc.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, s.opTO)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
SELECT replica, report::text, extract(epoch FROM now() - reported)::float8 FROM cipherd_hosts
WHERE reported > now() - make_interval(secs => $1) ORDER BY replica`, maxAge.Seconds())
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	var out []cryptosvc.PublishedHost
	for rows.Next() {
		var h cryptosvc.PublishedHost
		var report string
		var age float64
		if err := rows.Scan(&h.Replica, &report, &age); err != nil {
			return nil, classify(err)
		}
		h.Report, h.Age = []byte(report), time.Duration(age*float64(time.Second))
		out = append(out, h)
	}
	return out, classify(rows.Err())
}
