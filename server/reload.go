package server

import (
	"crypto/sha256"
	"fmt"
	"reflect"
	"strings"

	"go.uber.org/zap"
)

// Settings that change at run time (Server.Reload) and those that need a
// restart. The reloadable ones live behind atomic pointers (the
// credentials in authState, the TLS certificate and client CA in
// tlsState), so that a request sees either the old set or the new one,
// whole. Everything else is read at start-up into structures that
// requests use without synchronization (the route table, fasthttp's
// limits and timeouts, the keystore, the cipher selection).

// reloadable are the yaml keys of the settings Reload applies. log_level is
// applied by the program that owns the logger (cipherd serve).
var reloadable = map[string]bool{
	"identities":           true,
	"policies":             true,
	"jwt_issuers":          true,
	"jwt_clock_skew":       true,
	"jwt_refresh_interval": true,
	"trusted_proxies":      true,
	"rate_limit":           true,
	"rate_burst":           true,
	"tls_cert":             true,
	"tls_key":              true,
	"tls_client_ca":        true,
	"log_level":            true,
}

// Reload applies the run-time settings of cfg to the running server:
// identities, policies, JWT issuers, trusted proxies, rate limits, and the TLS
// certificate, key and client CA files, which it reads again even when
// their names did not change. It checks everything first and changes
// nothing when anything fails: the settings in service stay, and the error
// says why. The admin token stays the one in service unless cfg sets one.
//
// Other settings keep the value they started with; restart lists the yaml
// keys of those that cfg changes, for the caller to report. Turning TLS on
// or off is one of them.
func (s *Server) Reload(cfg Config) (restart []string, err error) {
	defer func() { s.met.ops.reloaded(err == nil) }()
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("server: configuration: %w", err)
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()

	restart = restartOnly(&s.cfg, &cfg)
	cfg.now = s.cfg.now // the server's clock, which no file sets
	old := s.auth()
	admin := old.tokens[0].sum
	if cfg.AdminToken != "" {
		admin = sha256.Sum256([]byte(cfg.AdminToken))
	}
	a, err := buildAuth(&cfg, admin, old)
	if err != nil {
		return nil, err
	}
	a.limits.carry(old.limits)
	tlsOn := cfg.TLSCert != ""
	switch {
	case tlsOn != (s.tls != nil):
		restart = append(restart, "tls_cert")
	case tlsOn:
		// The last step that can fail: when it does, nothing has changed.
		if err := s.tls.setFiles(cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
	}
	// The issuers' key files are read again; keys that fail to load are
	// logged and counted, and do not fail the reload, as at start-up.
	s.startJWKS(a)
	s.authp.Store(a)
	s.log.Info("configuration reloaded", zap.Bool("tls", s.tls != nil),
		zap.Int("identities", len(cfg.Identities)), zap.Int("policies", len(cfg.Policies)),
		zap.Int("trusted_proxies", len(cfg.TrustedProxies)), zap.Float64("rate_limit", cfg.RateLimit), zap.Int("rate_burst", cfg.RateBurst))
	return restart, nil
}

// restartOnly returns the yaml keys of the settings other than the
// reloadable ones whose values differ between running and next.
func restartOnly(running, next *Config) []string {
	var out []string
	a, b := reflect.ValueOf(running).Elem(), reflect.ValueOf(next).Elem()
	for i := range a.NumField() {
		key, _, _ := strings.Cut(a.Type().Field(i).Tag.Get("yaml"), ",")
		if key == "" || key == "-" || reloadable[key] {
			continue
		}
		if !sameSetting(a.Field(i), b.Field(i)) {
			out = append(out, key)
		}
	}
	return out
}

// sameSetting is reflect.DeepEqual, with a nil and an empty list the same.
func sameSetting(a, b reflect.Value) bool {
	if a.Kind() == reflect.Slice && a.Len() == 0 && b.Len() == 0 {
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// carry keeps old's buckets for the identities that remain, when old
// limits at the same rate and burst, so that a reload neither refills nor
// empties them.
func (l *rateLimiter) carry(old *rateLimiter) {
	if l == nil || old == nil || l.rate != old.rate || l.burst != old.burst {
		return
	}
	for name := range l.buckets {
		if b := old.buckets[name]; b != nil {
			l.buckets[name] = b
		}
	}
}
