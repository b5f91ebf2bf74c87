package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/pires/go-proxyproto"
	"go.uber.org/zap"
	"golang.org/x/net/netutil"
	"golang.org/x/sync/semaphore"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/auditlog"
	"github.com/cipherd/cipherd/kernels"
	"github.com/cipherd/cipherd/selftest"
)

// Server is cipherd's HTTP service: a fiber app over a cryptosvc.Service,
// with the self-test, the benchmark and the selection behind it.
type Server struct {
	cfg   Config
	log   *zap.Logger
	app   *fiber.App
	svc   *cryptosvc.Service
	store cryptosvc.Keystore
	kat   *selftest.KATReport
	sel   *selftest.Selection
	authp atomic.Pointer[authState] // the credentials in service (auth); Reload replaces them
	met   *metrics
	speed *speedState
	// replica identifies this process in the fleet view: random per
	// process.
	replica    string
	fleetReads fleetReads
	tls        *tlsState // nil without TLS

	// tokens keeps the service tokens: the keystore, when it can (nil
	// for a keyring); tokenIDs caches their identities (tokens.go).
	tokens   cryptosvc.TokenStore
	tokenIDs tokenIdentities

	// audits is the audit trail: a request's records are written to it
	// before its answer (audit.go).
	audits *auditlog.Log
	amac   *auditMAC   // nil: the records carry no HMACs
	tab    *routeTable // the route table the app serves (newApp)

	openAPIMu  sync.Mutex
	openAPIDoc []byte       // the served OpenAPI document, made on first use
	openAPIFor *rateLimiter // the limits openAPIDoc states

	// verifyBudget holds the bytes ?verify=full requests may buffer;
	// verifyReserved is what they hold now (verifybuf.go).
	verifyBudget   *semaphore.Weighted
	verifyReserved atomic.Int64
	streams        *streamLimiter // streams in flight per identity
	// authFails limits failed authentications per client address; nil:
	// no limit (authlimit.go).
	authFails *authFailLimiter

	ready    atomic.Bool // self-test, selection and keys done, not draining
	draining atomic.Bool
	started  time.Time

	// AdminTokenGenerated is the admin token generated on this start, shown
	// once; empty when the token was configured or generated earlier.
	AdminTokenGenerated string

	// now is the clock of JWT validity, of the JWKS miss rate and of
	// service tokens' expiry (Config.now; time.Now by default).
	now func() time.Time
	// jwksKick wakes refreshJWKS for the fetches startJWKS queued.
	jwksKick chan struct{}

	reloadMu  sync.Mutex // serializes Reload
	closeOnce sync.Once
	bgCtx     context.Context // ends when Shutdown ends the background work
	bg        context.CancelFunc
	bgDone    sync.WaitGroup // background, waited for before Shutdown returns and the store may close
}

// New runs the start-up sequence (known-answer tests, cipher selection, keys,
// default key, credentials) over the keystore cfg.Keystore and returns a
// server ready to serve. ctx bounds the start-up only. The keystore stays
// the caller's: New does not close it, even when it fails.
func New(ctx context.Context, cfg Config) (*Server, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("server: configuration: %w", err)
	}
	if cfg.Keystore == nil {
		return nil, errors.New("server: configuration: Keystore is nil: open a keystore (cryptosvc.OpenFileStore, …) and pass it")
	}
	log := cfg.Logger
	if log == nil {
		zc := zap.NewProductionConfig()
		zc.Sampling = nil // sampling would drop access and audit lines
		l, err := zc.Build()
		if err != nil {
			return nil, err
		}
		log = l
	}
	s := &Server{cfg: cfg, log: log, started: time.Now(), verifyBudget: semaphore.NewWeighted(cfg.VerifyFullBudget), streams: newStreamLimiter(cfg.MaxStreamsPerIdentity),
		met: newMetrics(), now: cfg.now, jwksKick: make(chan struct{}, 1),
		authFails: newAuthFailLimiter(cfg.AuthFailureRate, cfg.AuthFailureBurst, defaultAuthFailMaxAddrs, log)}
	if s.now == nil {
		s.now = time.Now
	}
	s.bgCtx, s.bg = context.WithCancel(context.Background())
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("server: data directory: %w", err)
	}

	s.kat = selftest.RunKATs(selftest.KATConfig{Fail: cfg.SelftestFail, Logger: log})
	if err := s.kat.Err(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	for _, f := range s.kat.Failures() {
		log.Error("implementation disabled by its known-answer test", zap.String("kat", f.KAT), zap.String("impl", f.CipherName+"/"+f.Impl))
	}
	sel, err := s.selectCiphers(ctx)
	if err != nil {
		return nil, err
	}
	s.sel = sel

	s.store = cfg.Keystore
	s.tokens, _ = cfg.Keystore.(cryptosvc.TokenStore)
	s.svc, err = cryptosvc.New(cryptosvc.Config{
		Keystore:       s.store,
		AEAD:           sel.AEAD,
		Implementation: sel.Implementation,
		SizeClasses:    sizeClasses(sel),
		Logger:         log,

		MinRotationPeriod: cfg.MinRotationPeriod,
		BackupKey:         cfg.BackupKey,
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if err := s.ensureDefaultKey(ctx); err != nil {
		return nil, err
	}
	auth, err := newAuth(&s.cfg, log)
	if err != nil {
		return nil, err
	}
	s.startJWKS(auth)
	s.authp.Store(auth)
	s.AdminTokenGenerated = auth.generated
	if cfg.TLSCert != "" {
		if s.tls, err = newTLSState(&s.cfg, log); err != nil {
			return nil, err
		}
	}
	if s.audits, err = auditlog.OpenConfig(cfg.AuditLog, auditlog.Config{Observe: s.met.ops.auditWrite.observe}); err != nil {
		return nil, fmt.Errorf("server: audit_log: %w", err)
	}
	if n := s.audits.CutAtOpen(); n > 0 {
		s.log.Warn("the audit trail ended inside a record, cut short when the process that wrote it died; cut it off (no request that record served was answered)",
			zap.String("audit_log", cfg.AuditLog), zap.Int64("bytes", n))
	}
	s.openAuditMAC()
	s.replica = newReplicaID()
	s.speed = newSpeedState(s)
	s.app = s.newApp()

	s.bgDone.Go(func() { s.background(s.bgCtx) })
	s.bgDone.Go(func() { s.refreshJWKS(s.bgCtx) })
	s.bgDone.Go(func() { s.flushUsage(s.bgCtx) })
	s.bgDone.Go(func() { s.publishFleet(s.bgCtx) })
	s.ready.Store(true)
	log.Info("cipherd ready",
		zap.String("aead", sel.AEADName), zap.String("reason", sel.AEADReason),
		zap.Bool("profile_cached", sel.Cached), zap.Duration("startup", time.Since(s.started)))
	return s, nil
}

// selectCiphers runs the quick profile (cached in the data directory) and
// chooses the AEAD for new data within the configured limits.
func (s *Server) selectCiphers(ctx context.Context) (*selftest.Selection, error) {
	sc := selftest.SelectConfig{
		KAT:           s.kat,
		SkipBenchmark: s.cfg.SkipBenchmark,
		CacheDir:      filepath.Join(s.cfg.DataDir, "speed-cache"),
		Logger:        s.log,
	}
	if s.cfg.AEAD != "" {
		c, err := cryptosvc.ParseAEAD(s.cfg.AEAD)
		if err != nil {
			return nil, fmt.Errorf("server: aead: %w", err)
		}
		sc.Pin = c
	}
	if len(s.cfg.AllowedAEADs) > 0 {
		for _, name := range s.cfg.AllowedAEADs {
			c, err := cryptosvc.ParseAEAD(name)
			if err != nil {
				return nil, fmt.Errorf("server: allowed_aeads: %w", err)
			}
			sc.Candidates = append(sc.Candidates, c)
		}
		// keep the default order of preference among the allowed
		allowed := sc.Candidates
		sc.Candidates = slices.DeleteFunc(selftest.AllCandidates(), func(c kernels.Cipher) bool {
			return !slices.Contains(allowed, c)
		})
	}
	sel, err := selftest.Select(ctx, sc)
	if err != nil {
		return nil, fmt.Errorf("server: cipher selection: %w", err)
	}
	return sel, nil
}

// ensureDefaultKey creates the default key if the store lacks it and can
// be written.
func (s *Server) ensureDefaultKey(ctx context.Context) error {
	name := s.cfg.DefaultKey
	if name == "-" {
		return nil
	}
	_, err := s.svc.DescribeKey(ctx, name)
	if errors.Is(err, cryptosvc.ErrKeyNotFound) {
		_, err = s.svc.CreateKey(ctx, name, cryptosvc.KeyConfig{})
		switch {
		case errors.Is(err, cryptosvc.ErrKeyExists):
			err = nil // another replica of a shared keystore made it first
		case errors.Is(err, cryptosvc.ErrReadOnly):
			err = nil // a keyring's keys are made where the keyring is
		}
	}
	if err != nil {
		return fmt.Errorf("server: default key %q: %w", name, err)
	}
	return nil
}

// rotationCheck returns how often scheduled rotation (and deletion) looks for due keys:
// every minute (docs/API.md), or every min_rotation_period if shorter, so
// that a key rotates within one interval of its period's end. A look is a
// walk over the keys in memory.
func rotationCheck(cfg *Config) time.Duration { return min(time.Minute, cfg.MinRotationPeriod) }

// background runs periodic work until ctx ends: the full speed table once,
// scheduled key rotation and deletion, and the removal of expired service
// tokens.
func (s *Server) background(ctx context.Context) {
	s.speed.runInitial(ctx)
	t := time.NewTicker(rotationCheck(&s.cfg))
	defer t.Stop()
	for {
		if rotated, err := s.svc.RotateDue(ctx); err != nil && !errors.Is(err, cryptosvc.ErrReadOnly) && !errors.Is(err, cryptosvc.ErrUnavailable) {
			s.log.Warn("scheduled rotation failed", zap.Error(err))
		} else if len(rotated) > 0 {
			s.log.Info("keys rotated on schedule", zap.Strings("keys", rotated))
		}
		s.deleteDue(ctx)
		s.expireTokens(ctx)
		s.authFails.sweep(time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// auth returns the credentials in service.
func (s *Server) auth() *authState { return s.authp.Load() }

// App returns the fiber app, to serve directly or to mount under a host app
// (host.Mount("/crypto", s.App())).
func (s *Server) App() *fiber.App { return s.app }

// Service returns the embedded cryptosvc.Service.
func (s *Server) Service() *cryptosvc.Service { return s.svc }

// Ready reports whether /readyz answers 200.
func (s *Server) Ready() bool { return s.ready.Load() && !s.draining.Load() }

// Serve accepts connections on ln (wrapping it in TLS when configured) until
// Shutdown, holding at most MaxConnections open at once.
func (s *Server) Serve(ln net.Listener) error {
	if s.cfg.MaxConnections > 0 {
		// Under the TLS wrapper, so that handshakes in progress count too.
		ln = netutil.LimitListener(ln, s.cfg.MaxConnections)
	}
	if s.cfg.ProxyProtocol {
		// Under TLS too: the PROXY header comes before the handshake.
		ln = &proxyproto.Listener{Listener: ln, ConnPolicy: s.proxyPolicy, ReadHeaderTimeout: s.cfg.RequestTimeout}
	}
	ln = s.guardListener(ln, s.tls == nil)
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls.config())
	}
	return s.app.Listener(ln)
}

// proxyPolicy reads the PROXY header of a connection from a trusted proxy
// (as trusted when it connects) and not that of anyone else, whose header
// then reaches the HTTP parser and fails the request.
func (s *Server) proxyPolicy(o proxyproto.ConnPolicyOptions) (proxyproto.Policy, error) {
	if a, ok := o.Upstream.(*net.TCPAddr); ok && s.auth().trustedProxy(a.IP) {
		return proxyproto.USE, nil
	}
	return proxyproto.SKIP, nil
}

// guardListener wraps ln's connections as the server needs them: read
// deadlines set in few system calls, a linger before closing one whose
// upload was refused, and, when plain (no TLS above), an answer at once to
// a TLS handshake (coalescingConn).
func (s *Server) guardListener(ln net.Listener, plain bool) net.Listener {
	return coalescingListener{Listener: ln, slack: deadlineSlack(s.cfg.RequestTimeout, s.cfg.StreamIdleTimeout, connIdleTimeout), plain: plain}
}

// ListenAndServe listens on the configured address and serves.
func (s *Server) ListenAndServe() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return err
	}
	s.log.Info("listening", zap.String("addr", ln.Addr().String()), zap.Bool("tls", s.tls != nil))
	return s.Serve(ln)
}

// Shutdown turns readiness off, waits DrainDelay so that load balancers stop
// sending, then stops accepting and waits for requests in flight until ctx
// ends, and ends the background work. It does not close the keystore: the
// caller that opened it closes it once Shutdown has returned.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.closeOnce.Do(func() {
		s.draining.Store(true)
		s.log.Info("draining", zap.Duration("delay", s.cfg.DrainDelay))
		select {
		case <-time.After(s.cfg.DrainDelay):
		case <-ctx.Done():
		}
		err = s.app.ShutdownWithContext(ctx)
		// The background work ends before Shutdown returns, and so before
		// the caller closes the store: a scheduled or requested rotation
		// finishes its write, and nothing logs about a closed store.
		s.bg()
		s.bgDone.Wait()
		// The requests are done: their counts reach the store before
		// the caller closes it.
		s.flushUsageOnce(ctx)
		if s.tls != nil {
			s.tls.close()
		}
		if cerr := s.audits.Close(); cerr != nil {
			s.log.Error("closing the audit trail", zap.Error(cerr))
		}
		s.log.Info("stopped", zap.Error(err))
	})
	return err
}
