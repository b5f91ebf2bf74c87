package pgstore

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/cipherd/cipherd/cryptosvc"
)

// Config configures Open.
type Config struct {
	// DSN locates the database: a libpq URL
	// (postgres://user@host:5432/db?sslmode=verify-full) or key=value
	// string. What it leaves out comes from the libpq environment
	// (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGPASSFILE or ~/.pgpass,
	// PGSSLMODE, PGSSLROOTCERT, …), as in libpq. Required.
	DSN string
	// RootKeyProvider wraps the storage key that seals every record
	// (cryptosvc.Sealer); the wrapped storage key is kept in the database.
	RootKeyProvider cryptosvc.RootKeyProvider
	// RootKey, when RootKeyProvider is nil, is a static root key. One of
	// the two is required: there is no development root key for a shared
	// store.
	RootKey *cryptosvc.Secret
	// Logger receives connection losses, reconnections and records that
	// do not open; never material. nil means no logging.
	Logger *zap.Logger
	// Rand supplies nonces. nil means crypto/rand.Reader.
	Rand io.Reader
	// MaxConns bounds the pool of connections for writes and reads on
	// miss, besides the one that listens. 0 means 4.
	MaxConns int32
	// OpTimeout bounds one database operation (a write, a read on miss).
	// 0 means 5s.
	OpTimeout time.Duration
	// ReconnectMax is the longest wait between two attempts to reconnect
	// the listener. 0 means 2s.
	ReconnectMax time.Duration
}

// defaultConnectTimeout bounds a connection attempt when the connection
// string sets no connect_timeout.
const defaultConnectTimeout = 3 * time.Second

// channel is the NOTIFY channel; a payload is "<revision> <name>".
const channel = "cipherd_keys"

// Store is the PostgreSQL keystore. Get and List are served from memory;
// see the package comment.
type Store struct {
	pool    *pgxpool.Pool
	connCfg *pgx.ConnConfig // the listener's
	sealer  *cryptosvc.Sealer
	root    cryptosvc.RootKeyProvider // wraps the storage key; lent to key backups
	log     *zap.Logger
	opTO    time.Duration
	backoff time.Duration

	snap  atomic.Pointer[snapshot] // nil after Close
	mu    sync.Mutex               // serialises apply
	watch cryptosvc.KeyWatchers

	tokens cryptosvc.TokenSet // service tokens (tokens.go)

	flightMu sync.Mutex
	flights  map[string]*flights
	unknown  unknownReads  // reads on miss of unknown names (unknown.go)
	misses   chan struct{} // bounds concurrent reads on miss

	reads atomic.Int64     // queries of loadKey and readUnknown, for tests
	now   func() time.Time // time.Now; tests stop it

	health atomic.Pointer[error] // nil: up
	synced atomic.Int64          // Unix nanoseconds of the last successful sync (LastSync)

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	closed sync.Once
}

var (
	_ cryptosvc.Keystore       = (*Store)(nil)
	_ cryptosvc.HealthReporter = (*Store)(nil)
	_ cryptosvc.SyncReporter   = (*Store)(nil)
)

// snapshot is one immutable state of memory.
type snapshot struct {
	keys  map[string]entry
	names []string // sorted, live keys only
}

// entry is a key as of a revision; key is nil for a deleted key.
type entry struct {
	key *cryptosvc.StoredKey
	rev uint64
}

// flight is one read on miss; flights are a name's running read and the
// one queued behind it.
type flight struct {
	done chan struct{}
	err  error
}

type flights struct{ cur, next *flight }

// Open connects, creates or migrates the schema, unwraps the database's
// storage key with the root key (making one on first use), loads every key
// and starts listening for changes.
func Open(ctx context.Context, cfg Config) (_ *Store, err error) {
	provider := cfg.RootKeyProvider
	if provider == nil {
		if cfg.RootKey == nil {
			return nil, fmt.Errorf("%w: the PostgreSQL keystore needs a root key (root_key_file or CIPHERD_ROOT_KEY)", cryptosvc.ErrRootKey)
		}
		if provider, err = cryptosvc.NewStaticRootKey(cfg.RootKey, cfg.Rand); err != nil {
			return nil, err
		}
	}
	pc, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("pgstore: the connection string does not parse: %w", err)
	}
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	pc.MaxConns = cfg.MaxConns
	if pc.MaxConns <= 0 {
		pc.MaxConns = 4
	}
	// Ping every connection before it is handed out, not only those idle
	// for over a second (pgxpool's default): a connection whose backend
	// ended while the listener stayed up (a proxy or failover that cut
	// some connections, one dialled as the database crashed) would fail a
	// read on miss, and so a decryption, that a fresh one serves
	// (TestReadOnMissAfterPooledConnectionDies). The pool serves only key
	// administration and reads on miss, never a data request from memory;
	// BenchmarkReadOnMiss and BenchmarkRotate show the round trip it adds.
	pc.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return true }
	s := &Store{
		connCfg: pc.ConnConfig.Copy(),
		log:     cfg.Logger,
		opTO:    cfg.OpTimeout,
		backoff: cfg.ReconnectMax,
		flights: make(map[string]*flights),
		unknown: newUnknownReads(),
		now:     time.Now,
		misses:  make(chan struct{}, 4),
		done:    make(chan struct{}),
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.opTO <= 0 {
		s.opTO = 5 * time.Second
	}
	if s.backoff <= 0 {
		s.backoff = 2 * time.Second
	}
	if s.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	defer func() {
		if err != nil {
			s.pool.Close()
		}
	}()
	if err := migrate(ctx, s.pool); err != nil {
		return nil, classify(err)
	}
	if s.sealer, err = openStorageKey(ctx, s.pool, provider, cfg.Rand); err != nil {
		return nil, err
	}
	s.root = provider
	conn, err := s.subscribe(ctx)
	if err != nil {
		return nil, classify(err)
	}
	s.snap.Store(&snapshot{keys: map[string]entry{}})
	if err := s.catchUp(ctx, true); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.run(conn)
	return s, nil
}

// RootKeyProvider returns the provider that wraps the database's storage
// key, so that key backups can be sealed under the same root key.
func (s *Store) RootKeyProvider() cryptosvc.RootKeyProvider { return s.root }

var _ cryptosvc.RootKeyHolder = (*Store)(nil)

// Get returns the key named name from memory (shared: do not modify it).
func (s *Store) Get(_ context.Context, name string) (*cryptosvc.StoredKey, error) {
	snap := s.snap.Load()
	if snap == nil {
		return nil, cryptosvc.ErrClosed
	}
	if e := snap.keys[name]; e.key != nil {
		return e.key, nil
	}
	return nil, notFound(name)
}

// List returns the names of every key in memory, sorted.
func (s *Store) List(_ context.Context) ([]string, error) {
	snap := s.snap.Load()
	if snap == nil {
		return nil, cryptosvc.ErrClosed
	}
	return slices.Clone(snap.names), nil
}

// Watch calls fn after every change that reaches memory: this store's
// writes, other replicas' (by notification), and what a reconnection
// catches up on.
func (s *Store) Watch(fn func(name string)) (stop func()) { return s.watch.Add(fn) }

// Health returns nil while the listening connection is up, else an error
// wrapping cryptosvc.ErrUnavailable: memory then serves the keys it holds,
// but other replicas' changes do not arrive and writes are likely to fail.
func (s *Store) Health() error {
	if p := s.health.Load(); p != nil {
		return *p
	}
	return nil
}

// LastSync returns when memory was last known to be current: the last
// catch-up (at Open and after a reconnection), notification, read of a
// key, or ping of the idle listening connection (every 10 seconds without
// notifications), whose being up means no change was missed.
func (s *Store) LastSync() time.Time { return time.Unix(0, s.synced.Load()) }

// sync records that memory is current as of now.
func (s *Store) sync() { s.synced.Store(time.Now().UnixNano()) }

// Refresh reads the key named name from the database into memory and
// returns it. Concurrent calls for one name share one query. Names that
// memory holds no live key of are read in paced batches and a name found
// absent is not read again for a second (unknown.go), so that any number
// of unknown names costs the database a few queries a second. A key in
// memory that satisfies enough is returned without a query.
func (s *Store) Refresh(ctx context.Context, name string, enough func(*cryptosvc.StoredKey) bool) (*cryptosvc.StoredKey, error) {
	snap := s.snap.Load()
	if snap == nil {
		return nil, cryptosvc.ErrClosed
	}
	if cryptosvc.ValidateKeyName(name) != nil {
		return nil, cryptosvc.ErrKeyNotFound
	}
	// Not refused while Health reports an error: the pool may reach a
	// database that has just come back before the listener has, and a
	// version made there must open at once.
	if k := snap.keys[name].key; k == nil {
		return s.refreshUnknown(ctx, name, enough)
	} else if enough != nil && enough(k) {
		return k, nil
	}
	f := s.joinFlight(name)
	return s.getAfter(ctx, name, f.done, &f.err)
}

// getAfter waits for a read of name to end (done closed, its error in
// *err), then returns what memory holds of name.
func (s *Store) getAfter(ctx context.Context, name string, done <-chan struct{}, err *error) (*cryptosvc.StoredKey, error) {
	select {
	case <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if *err != nil {
		return nil, *err
	}
	return s.Get(ctx, name)
}

// joinFlight returns a read of name that starts no earlier than this
// call: the one in flight began too early to be sure of seeing what the
// caller missed, so callers arriving during it share the next one, which
// starts when it ends. Per name, one read runs and one waits, however
// many callers.
func (s *Store) joinFlight(name string) *flight {
	s.flightMu.Lock()
	defer s.flightMu.Unlock()
	q := s.flights[name]
	if q == nil {
		q = &flights{cur: &flight{done: make(chan struct{})}}
		s.flights[name] = q
		go s.fly(name, q.cur)
		return q.cur
	}
	if q.next == nil {
		q.next = &flight{done: make(chan struct{})}
	}
	return q.next
}

// fly runs one read on miss, detached from its callers' contexts, then
// the read queued behind it, if any.
func (s *Store) fly(name string, f *flight) {
	for f != nil {
		f.err = s.flyOnce(name)
		close(f.done)
		s.flightMu.Lock()
		q := s.flights[name]
		f, q.cur, q.next = q.next, q.next, nil
		if f == nil {
			delete(s.flights, name)
		}
		s.flightMu.Unlock()
	}
}

func (s *Store) flyOnce(name string) error {
	ctx, cancel := context.WithTimeout(s.ctx, s.opTO)
	defer cancel()
	select {
	case s.misses <- struct{}{}:
		defer func() { <-s.misses }()
	case <-ctx.Done():
		return classify(ctx.Err())
	}
	return s.reload(ctx, name, false)
}

// reload reads one key (or its absence) into memory; with force, what the
// database holds replaces memory even at an older revision (see apply).
func (s *Store) reload(ctx context.Context, name string, force bool) error {
	e, found, err := s.loadKey(ctx, name)
	if err != nil {
		return err
	}
	s.sync()
	if found {
		s.apply(map[string]entry{name: e}, false, force)
	}
	return nil
}

// Close stops listening and closes the connections; later calls fail with
// ErrClosed. Closing twice is not an error.
func (s *Store) Close() error {
	s.closed.Do(func() {
		s.watch.Close()
		s.cancel()
		<-s.done
		s.pool.Close()
		s.snap.Store(nil)
	})
	return nil
}

// apply moves memory forward: each entry replaces the one of its name if
// its revision is newer, so that a slow read never undoes a newer write.
// With force, entries replace memory whatever their revision: the database
// is the truth, and after a failover to a replica that lagged, or a
// restore, its revisions can be older than memory's; a conditional write
// that failed, or a reconnection, reads with force. With full, the entries
// are the whole database, and names absent from it leave memory. Watchers
// hear of every name whose entry changed.
func (s *Store) apply(entries map[string]entry, full, force bool) {
	s.mu.Lock()
	cur := s.snap.Load()
	if cur == nil {
		s.mu.Unlock()
		return
	}
	next := &snapshot{keys: make(map[string]entry, len(cur.keys)+len(entries))}
	var changed []string
	for name, e := range cur.keys {
		if _, ok := entries[name]; full && !ok {
			if e.key != nil {
				changed = append(changed, name)
			}
			continue
		}
		next.keys[name] = e
	}
	for name, e := range entries {
		if old, ok := next.keys[name]; ok && (old.rev == e.rev || old.rev > e.rev && !force) {
			continue
		}
		next.keys[name] = e
		changed = append(changed, name)
	}
	for name, e := range next.keys {
		if e.key != nil {
			next.names = append(next.names, name)
		}
	}
	slices.Sort(next.names)
	s.snap.Store(next)
	s.mu.Unlock()
	var live []string
	for name, e := range entries {
		if e.key != nil {
			live = append(live, name)
		}
	}
	s.forgetAbsent(live)
	for _, name := range changed {
		s.watch.Notify(name)
	}
}

// revision returns memory's revision of name (0: never seen).
func (s *Store) revision(name string) uint64 {
	if snap := s.snap.Load(); snap != nil {
		return snap.keys[name].rev
	}
	return 0
}

func notFound(name string) error {
	if cryptosvc.ValidateKeyName(name) != nil {
		return cryptosvc.ErrKeyNotFound
	}
	return fmt.Errorf("%w: %s", cryptosvc.ErrKeyNotFound, name)
}
