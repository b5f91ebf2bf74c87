package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/cipherd/cipherd/cryptosvc"
)

// keyRows selects keys with their versions, in order; one statement, so one
// snapshot of the database.
const keyRows = `
SELECT k.name, k.revision, k.deleted, k.meta, v.version, v.sealed
FROM cipherd_keys k LEFT JOIN cipherd_key_versions v ON v.name = k.name`

// loadKey reads one key; found is false if the database has no row for it
// at all (a tombstone is found, with a nil key).
func (s *Store) loadKey(ctx context.Context, name string) (e entry, found bool, err error) {
	s.reads.Add(1)
	rows, err := s.pool.Query(ctx, keyRows+` WHERE k.name = $1 ORDER BY v.version`, name)
	if err != nil {
		return entry{}, false, classify(err)
	}
	all, err := s.scanKeys(rows)
	if err != nil {
		return entry{}, false, err
	}
	e, found = all[name]
	return e, found, nil
}

// loadAll reads every key.
func (s *Store) loadAll(ctx context.Context) (map[string]entry, error) {
	rows, err := s.pool.Query(ctx, keyRows+` ORDER BY k.name, v.version`)
	if err != nil {
		return nil, classify(err)
	}
	return s.scanKeys(rows)
}

// scanKeys decodes rows of keyRows, ordered by name and version, opening
// every record.
func (s *Store) scanKeys(rows pgx.Rows) (map[string]entry, error) {
	defer rows.Close()
	out := make(map[string]entry)
	var (
		name, prev string
		rev        int64
		deleted    bool
		meta       []byte
		version    *int32
		sealed     []byte
		cur        *cryptosvc.StoredKey
	)
	finish := func() error {
		if cur == nil {
			return nil
		}
		if err := cur.Validate(); err != nil {
			return fmt.Errorf("key %s: %w", cur.Name, err)
		}
		e := out[cur.Name]
		e.key = cur
		out[cur.Name] = e
		cur = nil
		return nil
	}
	for rows.Next() {
		if err := rows.Scan(&name, &rev, &deleted, &meta, &version, &sealed); err != nil {
			return nil, classify(err)
		}
		if name != prev {
			if err := finish(); err != nil {
				return nil, err
			}
			prev = name
			out[name] = entry{rev: uint64(rev)}
			if !deleted {
				k, err := s.openMeta(name, meta)
				if err != nil {
					return nil, err
				}
				k.Revision = uint64(rev)
				cur = k
			}
		}
		if cur != nil && version != nil {
			v, err := s.openVersion(name, uint32(*version), sealed)
			if err != nil {
				return nil, err
			}
			cur.Versions = append(cur.Versions, v)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	if err := finish(); err != nil {
		return nil, err
	}
	return out, nil
}

// catchUp reloads every key into memory. At Open (strict) a record that
// does not open fails it; later, the store keeps serving what it has and
// logs the error.
func (s *Store) catchUp(ctx context.Context, strict bool) error {
	all, err := s.loadAll(ctx)
	if err == nil {
		var ts []*cryptosvc.ServiceToken
		if ts, err = s.loadTokens(ctx, ""); err == nil {
			s.tokens.Replace(ts)
		}
	}
	if err != nil {
		if !strict && !errors.Is(err, cryptosvc.ErrUnavailable) {
			s.log.Error("keystore: a record in the database does not open; keeping the keys in memory", zap.Error(err))
		}
		return err
	}
	s.apply(all, true, true)
	s.sync()
	return nil
}

// subscribe opens the listening connection.
func (s *Store) subscribe(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.connCfg.Copy())
	if err != nil {
		return nil, err
	}
	for _, ch := range []string{channel, tokenChannel} {
		if _, err := conn.Exec(ctx, "LISTEN "+ch); err != nil {
			conn.Close(context.Background())
			return nil, err
		}
	}
	return conn, nil
}

// run listens until Close, reconnecting and catching up after every loss.
func (s *Store) run(conn *pgx.Conn) {
	defer close(s.done)
	wait := 50 * time.Millisecond
	for {
		err := s.listen(conn)
		conn.Close(context.Background())
		conn = nil
		if s.ctx.Err() != nil {
			return
		}
		// The pool's idle connections went where the listening one did.
		// The ping before each use (Open's ShouldPing) would find them
		// dead one by one, and after a silent network loss each ping
		// would wait out its deadline first; closed now, the next reads
		// and writes dial afresh (TestPoolResetWhenListenerLost).
		s.pool.Reset()
		s.setDown(err)
		for conn == nil {
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, s.backoff)
			ctx, cancel := context.WithTimeout(s.ctx, s.opTO)
			c, err := s.subscribe(ctx)
			if err == nil {
				// LISTEN comes first, so a change committed during the
				// catch-up is both loaded and notified, never neither.
				if err = s.catchUp(ctx, false); err != nil {
					c.Close(context.Background())
				} else {
					conn = c
				}
			}
			cancel()
			if err != nil {
				s.setDown(err)
			}
		}
		wait = 50 * time.Millisecond
		s.setUp()
	}
}

// listen handles notifications until the connection fails or Close. It
// pings an idle connection, so that a silent network loss is noticed.
func (s *Store) listen(conn *pgx.Conn) error {
	for {
		ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
		n, err := conn.WaitForNotification(ctx)
		cancel()
		if s.ctx.Err() != nil {
			return s.ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			pctx, cancel := context.WithTimeout(s.ctx, s.opTO)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return err
			}
			s.sync()
			continue
		}
		if err != nil {
			return err
		}
		handle := s.notified
		if n.Channel == tokenChannel {
			handle = s.tokenNotified
		}
		if err := handle(n.Payload); err != nil {
			return err // reconnect and catch up: the change must not be lost
		}
		s.sync()
	}
}

// notified handles one payload, "<revision> <name>".
func (s *Store) notified(payload string) error {
	revText, name, ok := strings.Cut(payload, " ")
	rev, err := strconv.ParseUint(revText, 10, 64)
	if !ok || err != nil {
		return nil // not ours
	}
	if s.revision(name) >= rev {
		return nil // this store's own write, or already loaded
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.opTO)
	defer cancel()
	return s.reload(ctx, name, false)
}

func (s *Store) setDown(err error) {
	if err == nil {
		return
	}
	if s.health.Load() == nil {
		s.log.Warn("keystore database unreachable: serving the keys in memory, writes fail until it is back", zap.Error(err))
	}
	e := fmt.Errorf("%w: %v", cryptosvc.ErrUnavailable, err)
	s.health.Store(&e)
}

func (s *Store) setUp() {
	if s.health.Swap(nil) != nil {
		s.log.Info("keystore database reachable again; caught up")
	}
}

// isUndefinedTable reports whether err is PostgreSQL's undefined_table.
func isUndefinedTable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42P01"
}

// classify wraps err: cryptosvc.ErrUnavailable for a database that cannot
// be reached or is shutting down, ErrConflict for a serialisation failure,
// as it is otherwise.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "40001" || pe.Code == "40P01":
			return fmt.Errorf("%w: %s", cryptosvc.ErrConflict, pe.Message)
		case strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "57"), strings.HasPrefix(pe.Code, "53"):
			return fmt.Errorf("%w: %v", cryptosvc.ErrUnavailable, err)
		}
		return fmt.Errorf("pgstore: %w", err)
	}
	if errors.Is(err, cryptosvc.ErrUnavailable) || errors.Is(err, cryptosvc.ErrConflict) || errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("%w: %v", cryptosvc.ErrUnavailable, err)
}
