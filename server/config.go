package server

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/cipherd/cipherd/cryptosvc"
)

// ConfigVersion is the version of the YAML configuration file format.
const ConfigVersion = 1

// Config configures the server. The zero value of every field means its
// default, stated in its comment; Defaults fills them in. Each field can be set
// in the YAML file (key in the yaml tag) and most by an environment variable
// (named in the comment), which wins over the file.
type Config struct {
	// Version of the configuration file format; 0 or 1.
	Version int `yaml:"version"`

	// Addr to listen on. Default 127.0.0.1:8080. CIPHERD_ADDR.
	Addr string `yaml:"addr"`
	// DataDir holds the file keystore, the hashed admin token and the speed
	// cache. Default ./cipherd-data. CIPHERD_DATA_DIR.
	DataDir string `yaml:"data_dir"`
	// Keystore holds the keys the server serves, open and ready: the file
	// keystore (cryptosvc.OpenFileStore), a keyring (cryptosvc.OpenKeyring),
	// a PostgreSQL keystore (package cryptosvc/pgstore), cryptosvc.MemStore,
	// or any other implementation. It is required: nil makes New fail,
	// since the server cannot choose for its embedder where keys are kept
	// and a default in memory would lose them at exit. The server never
	// closes it: whoever opened it closes it after Shutdown returns, when
	// the server's background work on it has ended. A read-only store
	// (writes fail with cryptosvc.ErrReadOnly) gets no DefaultKey. Not
	// settable from the file: cipherd serve opens the store that the
	// settings below name.
	Keystore cryptosvc.Keystore `yaml:"-"`

	// Keyring, KeystoreURL, RootKeyFile and RootKeyURI name the keystore
	// and its root key for the program that opens it (cipherd serve, and
	// its rootkey and keys commands); New does not read them.
	//
	// Keyring, when set, is a read-only keyring file (a mounted Kubernetes
	// Secret) that replaces the file keystore in DataDir/keys; it reloads
	// when it changes. CIPHERD_KEYRING.
	Keyring string `yaml:"keyring"`
	// KeystoreURL, when set, is the URL of a PostgreSQL database
	// (postgres://user@host/db?sslmode=verify-full, libpq conventions:
	// PGPASSWORD, PGPASSFILE and the other PG* variables fill in what it
	// leaves out) that holds the keys for every replica using it, instead
	// of the file keystore; it needs RootKeyURI, RootKeyFile or
	// CIPHERD_ROOT_KEY. Empty means the file keystore. CIPHERD_KEYSTORE.
	KeystoreURL string `yaml:"keystore"`
	// RootKeyFile holds the root key that encrypts the keystore at rest
	// (32 bytes, base64 or hex). CIPHERD_ROOT_KEY_FILE; the key itself may
	// instead be in CIPHERD_ROOT_KEY. With neither, the file keystore keeps
	// a development root key in DataDir/keys, with a loud warning.
	RootKeyFile string `yaml:"root_key_file"`
	// RootKeyURI, when set, names the root-key provider instead of
	// RootKeyFile: "pkcs11:…" (an RFC 7512 URI of a key in a PKCS#11 token)
	// or "file:<path>" (package cryptosvc/rootkey; docs/OPERATIONS.md, Root
	// of trust). CIPHERD_ROOT_KEY_URI.
	RootKeyURI string `yaml:"root_key_uri"`
	// BackupKeyFile, when set, holds the backup key: 32 bytes, raw or as
	// base64 or hex text. Key backups are sealed under it by default, and
	// any server given the same key restores them, whatever its root key
	// (docs/OPERATIONS.md, Key backups). Empty means backups are sealed
	// under the root key only. Read by the program that starts the server
	// (cipherd serve), which hands New the key in BackupKey; New does not
	// read it, and a reload does not change it. CIPHERD_BACKUP_KEY_FILE.
	BackupKeyFile string `yaml:"backup_key_file"`
	// BackupKey is the backup key, loaded: cryptosvc.LoadBackupKey of
	// BackupKeyFile. nil means none. Not settable from the file.
	BackupKey *cryptosvc.Secret `yaml:"-"`
	// DefaultKey is created on first start if missing. Default "default";
	// "-" creates none. CIPHERD_DEFAULT_KEY.
	DefaultKey string `yaml:"default_key"`

	// AdminToken, when set, is the admin's bearer token. When empty, a token
	// is generated on first start, printed once, and stored hashed in
	// DataDir. CIPHERD_ADMIN_TOKEN (never read from the file).
	AdminToken string `yaml:"-"`
	// Identities are the API clients besides the admin, with their policies.
	Identities []IdentityConfig `yaml:"identities"`
	// Policies name sets of allow and deny rules; deny wins.
	Policies []PolicyConfig `yaml:"policies"`
	// JWTIssuers are the issuers whose signed JWTs identify callers: a
	// bearer token of three base64url segments that is no identity's
	// static token is verified against them, and an identity whose JWT
	// matches it is the caller. Default none: no JWT is accepted.
	JWTIssuers []JWTIssuerConfig `yaml:"jwt_issuers"`
	// JWTClockSkew is the leeway on a JWT's exp, nbf and iat, for clocks
	// that disagree a little. Default 30s; at most 5m.
	JWTClockSkew time.Duration `yaml:"jwt_clock_skew"`
	// JWTRefreshInterval is how often the keys of each issuer in
	// JWTIssuers are fetched (or read) again, besides when a token names
	// a key not held. Default 5m; from 1m to 24h.
	JWTRefreshInterval time.Duration `yaml:"jwt_refresh_interval"`
	// TrustedProxies are the CIDRs of proxies allowed to forward a client's
	// certificate in X-Forwarded-Client-Cert: an Envoy-style header with
	// Cert= (URL-escaped PEM), a bare URL-escaped PEM, or base64 DER. The
	// proxy must replace any header the client sent; several entries or lines
	// are refused. From anyone else the header is ignored.
	// CIPHERD_TRUSTED_PROXIES (comma-separated).
	TrustedProxies []string `yaml:"trusted_proxies"`
	// ProxyProtocol accepts the PROXY protocol (v1 or v2, as HAProxy's
	// send-proxy-v2 sends it) on connections from TrustedProxies: the
	// client address it carries replaces the proxy's in the audit trail,
	// the log and the limit on failed authentications. A trusted proxy's
	// connection without the header is taken as the proxy's own; on
	// anyone else's connection the header is not read, and the request
	// fails to parse. Needs TrustedProxies. CIPHERD_PROXY_PROTOCOL.
	ProxyProtocol bool `yaml:"proxy_protocol"`
	// RateLimit is the sustained requests per second allowed per identity
	// (the admin included), counted after authentication; over it, 429 with
	// Retry-After. 0 means no limit. CIPHERD_RATE_LIMIT.
	RateLimit float64 `yaml:"rate_limit"`
	// RateBurst is the burst above RateLimit. Default 2×RateLimit, at least 1.
	RateBurst int `yaml:"rate_burst"`
	// AuthFailureRate is the failed authentications per second allowed
	// per client address (an IPv4 address, or an IPv6 /64), as a token
	// bucket of AuthFailureBurst: over it, every request from the address
	// is refused 429 auth_rate_limited with Retry-After before its
	// credential is looked at, a good one too. Default 10; -1 means no
	// limit (behind a proxy that every client shares, say).
	// CIPHERD_AUTH_FAILURE_RATE.
	AuthFailureRate float64 `yaml:"auth_failure_rate"`
	// AuthFailureBurst is the failed authentications an address may make
	// at once above AuthFailureRate. Default 50.
	AuthFailureBurst int `yaml:"auth_failure_burst"`

	// TLSCert and TLSKey are PEM files; when set the server speaks TLS (1.2
	// minimum) and reloads them when they change. CIPHERD_TLS_CERT,
	// CIPHERD_TLS_KEY.
	TLSCert string `yaml:"tls_cert"`
	TLSKey  string `yaml:"tls_key"`
	// TLSClientCA, when set, requests client certificates and verifies them
	// against it when given (mTLS identities; clients without one can still
	// use a token); it reloads when it changes. CIPHERD_TLS_CLIENT_CA.
	TLSClientCA string `yaml:"tls_client_ca"`

	// AEAD pins the AEAD for new data; empty means the fastest measured.
	// CIPHERD_AEAD.
	AEAD string `yaml:"aead"`
	// AllowedAEADs are the AEADs the start-up selection may choose for new
	// data. Empty means those with 256-bit keys, aes-256-gcm and
	// chacha20-poly1305; list aes-128-gcm to allow it, or restrict the set
	// (e.g. AES-GCM only). CIPHERD_ALLOWED_AEADS (comma-separated).
	AllowedAEADs []string `yaml:"allowed_aeads"`
	// SkipBenchmark chooses by order of preference without the start-up
	// profile. CIPHERD_SKIP_BENCHMARK.
	SkipBenchmark bool `yaml:"skip_benchmark"`
	// CompareOpenSSL is an openssl binary (a path, or a name on PATH) that
	// measures the AEAD in use with `openssl speed -evp` after the quick
	// start-up table, 1 s at 1 KiB and 1 s at 16 KiB, so that /speed's
	// summary compares this host's figures with OpenSSL's. Empty: no
	// comparison. CIPHERD_COMPARE_OPENSSL.
	CompareOpenSSL string `yaml:"compare_openssl"`
	// SelftestFail makes the named known-answer tests, implementations or
	// ciphers fail on purpose at start-up, to exercise the failure path
	// (selftest.KATConfig.Fail). Empty means CIPHERD_SELFTEST_FAIL, which
	// the self-tests read themselves. Not settable from the file.
	SelftestFail string `yaml:"-"`

	// MaxJSONBody is the largest JSON request body. Default 4 MiB.
	MaxJSONBody int `yaml:"max_json_body"`
	// MaxBatchItems is the most items in one batch. Default 1000.
	MaxBatchItems int `yaml:"max_batch_items"`
	// MaxVerifyFull is the largest plaintext a stream decrypt with
	// ?verify=full buffers; a Content-Length no such plaintext could have is
	// refused 413 unread. Default 64 MiB.
	MaxVerifyFull int64 `yaml:"max_verify_full"`
	// VerifyFullBudget bounds the bytes all ?verify=full requests together
	// may buffer. Each reserves its Content-Length (at most MaxVerifyFull),
	// or MaxVerifyFull when chunked, before reading; one the budget cannot
	// cover is refused 503 verify_full_busy with Retry-After. At least
	// MaxVerifyFull. Default 4 × MaxVerifyFull (256 MiB).
	VerifyFullBudget int64 `yaml:"verify_full_budget"`
	// LocalSealMaxAge, LocalSealMaxMessages and LocalSealMaxBytes bound
	// the use of one sealing key (POST /v1/sealkey) by a client that seals
	// locally: how long it may seal with it, how many messages and how many
	// bytes of plaintext. They bound what one data key leaked from a client
	// exposes. Defaults 5m, 2^20 messages and 4 GiB.
	LocalSealMaxAge      time.Duration `yaml:"local_seal_max_age"`
	LocalSealMaxMessages int64         `yaml:"local_seal_max_messages"`
	LocalSealMaxBytes    int64         `yaml:"local_seal_max_bytes"`
	// MaxStreamsPerIdentity bounds the streaming requests (octet-stream
	// bodies, ?verify=full included) one identity has in flight, so that one
	// caller cannot hold every connection; more are refused 429
	// too_many_streams with Retry-After. Default 64; -1 means no limit.
	MaxStreamsPerIdentity int `yaml:"max_streams_per_identity"`
	// RequestTimeout bounds reading a request's headers and JSON body.
	// Default 15s.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// StreamIdleTimeout ends a streaming request that sends nothing for this
	// long. Default 60s.
	StreamIdleTimeout time.Duration `yaml:"stream_idle_timeout"`
	// ShutdownTimeout bounds the drain on SIGTERM. Default 20s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// DrainDelay keeps serving with readiness off before closing the
	// listener, so load balancers notice first. Default 0.
	DrainDelay time.Duration `yaml:"drain_delay"`
	// MinRotationPeriod is the shortest rotation_period a key may be
	// given (cryptosvc.Config.MinRotationPeriod); due rotations are looked
	// for every minute, or every MinRotationPeriod if shorter. Default 1h.
	// CIPHERD_MIN_ROTATION_PERIOD.
	MinRotationPeriod time.Duration `yaml:"min_rotation_period"`
	// UsageFlushInterval is how often the usage counted per key version
	// (GET /v1/keys/{key}) is added to the keystore's backend, in one
	// write; once more at shutdown. Other replicas see a replica's counts
	// within it. Default 5s; at least 100ms.
	// CIPHERD_USAGE_FLUSH_INTERVAL.
	UsageFlushInterval time.Duration `yaml:"usage_flush_interval"`
	// FleetInterval is how often a replica on a shared keystore
	// publishes its host report for GET /speed/fleet (and whenever its
	// speed table changes); a replica silent for three intervals drops
	// out of the view. Default 30s; at least 1s.
	// CIPHERD_FLEET_INTERVAL.
	FleetInterval time.Duration `yaml:"fleet_interval"`
	// KeyDeletionMinWait is the shortest wait a scheduled key deletion
	// (DELETE /v1/keys/{key}?wait=…) may ask for; shorter is refused
	// with 400 invalid_deletion_wait. Due deletions are looked for when
	// due rotations are. Default 168h (7 days); negative is refused.
	// CIPHERD_KEY_DELETION_MIN_WAIT.
	KeyDeletionMinWait time.Duration `yaml:"key_deletion_min_wait"`
	// KeyDeletionDefaultWait is the wait of a deletion that asks for
	// none. Default 720h (30 days), or KeyDeletionMinWait when that is
	// longer; at least KeyDeletionMinWait.
	// CIPHERD_KEY_DELETION_DEFAULT_WAIT.
	KeyDeletionDefaultWait time.Duration `yaml:"key_deletion_default_wait"`
	// AllowImmediateKeyDeletion lets DELETE /v1/keys/{key}?wait=0 delete
	// a key at once. Default false: such a request is refused with 403
	// immediate_deletion_disallowed. CIPHERD_ALLOW_IMMEDIATE_KEY_DELETION.
	AllowImmediateKeyDeletion bool `yaml:"allow_immediate_key_deletion"`
	// IOBufferSize is the read and write buffer per connection, and so the
	// largest request line and headers (at least 16 KiB). Default 256 KiB.
	IOBufferSize int `yaml:"io_buffer_size"`
	// MaxConnections bounds the connections Serve and ListenAndServe hold
	// open at once. A connection keeps its read and write buffers (2 ×
	// IOBufferSize) for as long as it is open, idle or not, so this bounds
	// that memory. At the limit the server accepts no more until one
	// closes; the kernel's listen queue holds the newcomers. Default 1024;
	// -1 means no limit.
	MaxConnections int `yaml:"max_connections"`

	// AuditLog is where the audit trail goes: a file path, appended to
	// (created 0600), or "stderr". Every record is written, and in a file
	// synced, before the request's answer is sent. Default
	// DataDir/audit.log. CIPHERD_AUDIT_LOG.
	AuditLog string `yaml:"audit_log"`
	// AuditFailOpen answers requests whose audit record could not be
	// written, counting them (cipherd_audit_failures_total) and logging
	// each at error level. Default false: such requests fail with 503
	// audit_unavailable. CIPHERD_AUDIT_FAIL_OPEN.
	AuditFailOpen bool `yaml:"audit_fail_open"`

	// ProtectInfoRoutes puts the routes that describe the service and its
	// hosts (/metrics, /speed, /speed/fleet, /version, /v1/api,
	// /v1/openapi.json) behind a credential allowed the operation
	// info-read ("*" grants it). /healthz and /readyz stay open for
	// probes. Default false: they answer anyone who can reach them.
	// CIPHERD_PROTECT_INFO_ROUTES.
	ProtectInfoRoutes bool `yaml:"protect_info_routes"`

	// MaxTokenTTL is the longest lifetime a service token may be issued
	// with (POST /v1/tokens); a request without a ttl gets 24h, or this
	// if shorter. At least 1m. Default 2160h (90 days).
	MaxTokenTTL time.Duration `yaml:"max_token_ttl"`

	// Logger receives access, audit and lifecycle logs. Nil means a zap
	// production (JSON) logger. Not settable from the file.
	Logger *zap.Logger `yaml:"-"`
	// now, when set, is the clock of JWT validity, of JWKS fetches for
	// unknown keys and of service tokens' expiry; nil means time.Now.
	// Tests set it.
	now func() time.Time

	// LogLevel is the level of cipherd serve's log: debug, info, warn or
	// error. Default info. CIPHERD_LOG_LEVEL; the flag -log-level wins
	// over both. A Logger an embedding program passes keeps its own level.
	LogLevel string `yaml:"log_level"`
}

// IdentityConfig is one API client.
type IdentityConfig struct {
	// Name identifies the client in logs and metrics; unique; "admin" is
	// reserved.
	Name string `yaml:"name"`
	// TokenSHA256 is the hex SHA-256 of its bearer token.
	TokenSHA256 string `yaml:"token_sha256"`
	// CertSHA256 is the hex SHA-256 of its client certificate's public key
	// (SubjectPublicKeyInfo), for mTLS.
	CertSHA256 string `yaml:"cert_sha256"`
	// JWT, when set, makes the identity the caller of the JWTs it
	// matches: of its issuer, with its claims.
	JWT *JWTMatchConfig `yaml:"jwt"`
	// Policies are the names of the policies that apply.
	Policies []string `yaml:"policies"`
}

// JWTIssuerConfig is an issuer of JWTs and where its public keys are.
// The keys come from one of: JWKSFile, JWKSURL, or, when both are empty,
// the issuer's OpenID Connect discovery document
// (Issuer/.well-known/openid-configuration, its jwks_uri).
type JWTIssuerConfig struct {
	// Issuer is the iss claim of its tokens, compared exactly; an https
	// URL unless JWKSFile is set. Unique among the issuers.
	Issuer string `yaml:"issuer"`
	// Audiences are the aud values it accepts: a token's aud must hold
	// one of them. Required: a token meant for another service must not
	// identify its bearer here.
	Audiences []string `yaml:"audiences"`
	// JWKSURL is the https URL of the issuer's JSON Web Key Set, fetched
	// without discovery.
	JWKSURL string `yaml:"jwks_url"`
	// JWKSFile is a file holding the issuer's JSON Web Key Set, read at
	// start, on reload and every JWTRefreshInterval: the case of a
	// Kubernetes API server's service-account issuer, whose keys
	// kubectl get --raw /openid/v1/jwks prints.
	JWKSFile string `yaml:"jwks_file"`
	// CAFile is a PEM bundle of the CAs that sign the issuer's HTTPS
	// certificate (discovery and JWKS URL). Empty means the system's.
	CAFile string `yaml:"ca_file"`
}

// JWTMatchConfig is the JWTs that identify an identity: those of Issuer
// whose claims hold every one of Claims.
type JWTMatchConfig struct {
	// Issuer is the issuer, one of Config.JWTIssuers.
	Issuer string `yaml:"issuer"`
	// Claims map claim names to values, at least one: a claim that is a
	// string must equal its value exactly, a claim that is a list of
	// strings must hold it; any other claim (missing, a number, an
	// object) does not match. For a Kubernetes service account:
	// sub: system:serviceaccount:NAMESPACE:NAME.
	Claims map[string]string `yaml:"claims"`
}

// PolicyConfig is a named set of rules.
type PolicyConfig struct {
	Name  string       `yaml:"name"`
	Allow []RuleConfig `yaml:"allow"`
	Deny  []RuleConfig `yaml:"deny"`
}

// RuleConfig allows or denies operations on keys whose names match a pattern
// (path.Match syntax, e.g. "orders-*"). Ops and Keys are both required.
type RuleConfig struct {
	Ops  []string `yaml:"ops"`  // encrypt, decrypt, rewrap, datakey, datakey-plaintext, keys-read, keys-admin, speed-run, encrypt-local, decrypt-local, or * (all of these); tokens-admin and keys-backup only by name
	Keys []string `yaml:"keys"` // patterns; tokens-admin takes "*"
}

// The defaults of Config.KeyDeletionMinWait and KeyDeletionDefaultWait:
// a deletion waits 30 days unless asked otherwise, and at least 7.
const (
	DefaultKeyDeletionMinWait = 7 * 24 * time.Hour
	DefaultKeyDeletionWait    = 30 * 24 * time.Hour
)

// Defaults returns cfg with every zero field set to its default.
func (cfg Config) Defaults() Config {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&cfg.Addr, "127.0.0.1:8080")
	def(&cfg.DataDir, "cipherd-data")
	def(&cfg.DefaultKey, "default")
	def(&cfg.LogLevel, "info")
	def(&cfg.AuditLog, filepath.Join(cfg.DataDir, "audit.log"))
	// AEAD names in one spelling, the one keys store and /speed shows.
	if cfg.AEAD != "" {
		cfg.AEAD = cryptosvc.CanonicalAEAD(cfg.AEAD)
	}
	cfg.AllowedAEADs = cryptosvc.CanonicalAEADs(cfg.AllowedAEADs)
	if cfg.MaxJSONBody <= 0 {
		cfg.MaxJSONBody = 4 << 20
	}
	if cfg.MaxBatchItems <= 0 {
		cfg.MaxBatchItems = 1000
	}
	if cfg.MaxVerifyFull <= 0 {
		cfg.MaxVerifyFull = 64 << 20
	}
	if cfg.VerifyFullBudget <= 0 {
		cfg.VerifyFullBudget = 4 * cfg.MaxVerifyFull
	}
	if cfg.LocalSealMaxAge <= 0 {
		cfg.LocalSealMaxAge = 5 * time.Minute
	}
	if cfg.LocalSealMaxMessages <= 0 {
		cfg.LocalSealMaxMessages = 1 << 20
	}
	if cfg.LocalSealMaxBytes <= 0 {
		cfg.LocalSealMaxBytes = 4 << 30
	}
	if cfg.MaxStreamsPerIdentity == 0 {
		cfg.MaxStreamsPerIdentity = 64
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 15 * time.Second
	}
	if cfg.StreamIdleTimeout <= 0 {
		cfg.StreamIdleTimeout = 60 * time.Second
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 20 * time.Second
	}
	if cfg.MinRotationPeriod <= 0 {
		cfg.MinRotationPeriod = cryptosvc.DefaultMinRotationPeriod
	}
	if cfg.FleetInterval <= 0 {
		cfg.FleetInterval = 30 * time.Second
	}
	if cfg.UsageFlushInterval <= 0 {
		cfg.UsageFlushInterval = 5 * time.Second
	}
	if cfg.KeyDeletionMinWait == 0 {
		cfg.KeyDeletionMinWait = DefaultKeyDeletionMinWait
	}
	if cfg.KeyDeletionDefaultWait == 0 {
		cfg.KeyDeletionDefaultWait = max(DefaultKeyDeletionWait, cfg.KeyDeletionMinWait)
	}
	if cfg.IOBufferSize <= 0 {
		cfg.IOBufferSize = 256 << 10
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = 1024
	}
	if cfg.JWTClockSkew <= 0 {
		cfg.JWTClockSkew = 30 * time.Second
	}
	if cfg.JWTRefreshInterval <= 0 {
		cfg.JWTRefreshInterval = 5 * time.Minute
	}
	if cfg.MaxTokenTTL <= 0 {
		cfg.MaxTokenTTL = 90 * 24 * time.Hour
	}
	if cfg.AuthFailureRate == 0 {
		cfg.AuthFailureRate = 10
	}
	if cfg.AuthFailureBurst == 0 {
		cfg.AuthFailureBurst = 50
	}
	if cfg.RateLimit > 0 && cfg.RateBurst <= 0 {
		cfg.RateBurst = max(1, int(2*cfg.RateLimit))
	}
	return cfg
}

// ApplyEnv overrides cfg with the CIPHERD_* variables that getenv returns.
func (cfg *Config) ApplyEnv(getenv func(string) string) error {
	str := func(name string, p *string) {
		if v := getenv(name); v != "" {
			*p = v
		}
	}
	list := func(name string, p *[]string) {
		if v := getenv(name); v != "" {
			*p = nil
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					*p = append(*p, s)
				}
			}
		}
	}
	str("CIPHERD_ADDR", &cfg.Addr)
	str("CIPHERD_DATA_DIR", &cfg.DataDir)
	str("CIPHERD_KEYRING", &cfg.Keyring)
	str("CIPHERD_KEYSTORE", &cfg.KeystoreURL)
	str("CIPHERD_ROOT_KEY_FILE", &cfg.RootKeyFile)
	str("CIPHERD_ROOT_KEY_URI", &cfg.RootKeyURI)
	str("CIPHERD_BACKUP_KEY_FILE", &cfg.BackupKeyFile)
	str("CIPHERD_DEFAULT_KEY", &cfg.DefaultKey)
	str("CIPHERD_ADMIN_TOKEN", &cfg.AdminToken)
	str("CIPHERD_TLS_CERT", &cfg.TLSCert)
	str("CIPHERD_TLS_KEY", &cfg.TLSKey)
	str("CIPHERD_TLS_CLIENT_CA", &cfg.TLSClientCA)
	str("CIPHERD_AEAD", &cfg.AEAD)
	str("CIPHERD_COMPARE_OPENSSL", &cfg.CompareOpenSSL)
	str("CIPHERD_LOG_LEVEL", &cfg.LogLevel)
	str("CIPHERD_AUDIT_LOG", &cfg.AuditLog)
	list("CIPHERD_ALLOWED_AEADS", &cfg.AllowedAEADs)
	list("CIPHERD_TRUSTED_PROXIES", &cfg.TrustedProxies)
	var errs []error
	if v := getenv("CIPHERD_RATE_LIMIT"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			errs = append(errs, fmt.Errorf("CIPHERD_RATE_LIMIT: %q is not a non-negative number", v))
		}
		cfg.RateLimit = f
	}
	if v := getenv("CIPHERD_AUTH_FAILURE_RATE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 && f != -1 {
			errs = append(errs, fmt.Errorf("CIPHERD_AUTH_FAILURE_RATE: %q is not a non-negative number or -1", v))
		}
		cfg.AuthFailureRate = f
	}
	if v := getenv("CIPHERD_MIN_ROTATION_PERIOD"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("CIPHERD_MIN_ROTATION_PERIOD: %q is not a positive duration such as \"1h\"", v))
		}
		cfg.MinRotationPeriod = d
	}
	if v := getenv("CIPHERD_FLEET_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("CIPHERD_FLEET_INTERVAL: %q is not a positive duration such as \"30s\"", v))
		}
		cfg.FleetInterval = d
	}
	if v := getenv("CIPHERD_USAGE_FLUSH_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("CIPHERD_USAGE_FLUSH_INTERVAL: %q is not a positive duration such as \"5s\"", v))
		}
		cfg.UsageFlushInterval = d
	}
	for _, d := range []struct {
		name string
		p    *time.Duration
	}{{"CIPHERD_KEY_DELETION_MIN_WAIT", &cfg.KeyDeletionMinWait}, {"CIPHERD_KEY_DELETION_DEFAULT_WAIT", &cfg.KeyDeletionDefaultWait}} {
		if v := getenv(d.name); v != "" {
			w, err := time.ParseDuration(v)
			if err != nil || w <= 0 {
				errs = append(errs, fmt.Errorf("%s: %q is not a positive duration such as \"168h\"", d.name, v))
			}
			*d.p = w
		}
	}
	if v := getenv("CIPHERD_ALLOW_IMMEDIATE_KEY_DELETION"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("CIPHERD_ALLOW_IMMEDIATE_KEY_DELETION: %q is not a boolean", v))
		}
		cfg.AllowImmediateKeyDeletion = b
	}
	if v := getenv("CIPHERD_AUDIT_FAIL_OPEN"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("CIPHERD_AUDIT_FAIL_OPEN: %q is not a boolean", v))
		}
		cfg.AuditFailOpen = b
	}
	if v := getenv("CIPHERD_PROTECT_INFO_ROUTES"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("CIPHERD_PROTECT_INFO_ROUTES: %q is not a boolean", v))
		}
		cfg.ProtectInfoRoutes = b
	}
	if v := getenv("CIPHERD_PROXY_PROTOCOL"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("CIPHERD_PROXY_PROTOCOL: %q is not a boolean", v))
		}
		cfg.ProxyProtocol = b
	}
	if v := getenv("CIPHERD_SKIP_BENCHMARK"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("CIPHERD_SKIP_BENCHMARK: %q is not a boolean", v))
		}
		cfg.SkipBenchmark = b
	}
	return errors.Join(errs...)
}

// Validate checks a configuration after Defaults.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.Version != 0 && cfg.Version != ConfigVersion {
		errs = append(errs, fmt.Errorf("config version %d is not supported (want %d)", cfg.Version, ConfigVersion))
	}
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		errs = append(errs, fmt.Errorf("addr %q: %v", cfg.Addr, err))
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		errs = append(errs, errors.New("tls_cert and tls_key go together"))
	}
	if cfg.TLSClientCA != "" && cfg.TLSCert == "" {
		errs = append(errs, errors.New("tls_client_ca needs tls_cert and tls_key"))
	}
	switch cfg.LogLevel {
	case "", "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log_level %q is not debug, info, warn or error", cfg.LogLevel))
	}
	if cfg.RateLimit < 0 || math.IsNaN(cfg.RateLimit) || math.IsInf(cfg.RateLimit, 0) {
		errs = append(errs, fmt.Errorf("rate_limit %v must be a finite non-negative number", cfg.RateLimit))
	}
	if r := cfg.AuthFailureRate; r < 0 && r != -1 || math.IsNaN(r) || math.IsInf(r, 0) {
		errs = append(errs, fmt.Errorf("auth_failure_rate %v: want a positive number, or -1 for no limit", r))
	}
	if cfg.AuthFailureBurst < 0 {
		errs = append(errs, fmt.Errorf("auth_failure_burst %d: want a positive number", cfg.AuthFailureBurst))
	}
	if cfg.VerifyFullBudget < cfg.MaxVerifyFull {
		errs = append(errs, fmt.Errorf("verify_full_budget %d is below max_verify_full %d: no request at the limit could be served", cfg.VerifyFullBudget, cfg.MaxVerifyFull))
	}
	if cfg.MaxConnections < -1 {
		errs = append(errs, fmt.Errorf("max_connections %d: want a positive number, or -1 for no limit", cfg.MaxConnections))
	}
	if cfg.MaxStreamsPerIdentity < -1 {
		errs = append(errs, fmt.Errorf("max_streams_per_identity %d: want a positive number, or -1 for no limit", cfg.MaxStreamsPerIdentity))
	}
	if cfg.FleetInterval < time.Second {
		errs = append(errs, fmt.Errorf("fleet_interval %v is below 1s", cfg.FleetInterval))
	}
	if cfg.UsageFlushInterval < minUsageFlush {
		errs = append(errs, fmt.Errorf("usage_flush_interval %v is below %v", cfg.UsageFlushInterval, minUsageFlush))
	}
	if cfg.KeyDeletionMinWait < 0 {
		errs = append(errs, fmt.Errorf("key_deletion_min_wait %v: want a positive duration", cfg.KeyDeletionMinWait))
	}
	if cfg.KeyDeletionDefaultWait < cfg.KeyDeletionMinWait {
		errs = append(errs, fmt.Errorf("key_deletion_default_wait %v is below key_deletion_min_wait %v: a deletion that asks for no wait would be refused", cfg.KeyDeletionDefaultWait, cfg.KeyDeletionMinWait))
	}
	if cfg.MaxTokenTTL < minTokenTTL {
		errs = append(errs, fmt.Errorf("max_token_ttl %v is below the shortest token lifetime, %v", cfg.MaxTokenTTL, minTokenTTL))
	}
	for _, p := range cfg.TrustedProxies {
		if _, _, err := net.ParseCIDR(p); err != nil {
			errs = append(errs, fmt.Errorf("trusted proxy %q is not a CIDR", p))
		}
	}
	if cfg.ProxyProtocol && len(cfg.TrustedProxies) == 0 {
		errs = append(errs, errors.New("proxy_protocol needs trusted_proxies: the addresses whose PROXY headers to believe"))
	}
	if cfg.JWTClockSkew > 5*time.Minute {
		errs = append(errs, fmt.Errorf("jwt_clock_skew %v: at most 5m", cfg.JWTClockSkew))
	}
	if cfg.JWTRefreshInterval < time.Minute || cfg.JWTRefreshInterval > 24*time.Hour {
		errs = append(errs, fmt.Errorf("jwt_refresh_interval %v: from 1m to 24h", cfg.JWTRefreshInterval))
	}
	errs = append(errs, validateJWTIssuers(cfg.JWTIssuers)...)
	if cfg.KeystoreURL != "" {
		if !strings.HasPrefix(cfg.KeystoreURL, "postgres://") && !strings.HasPrefix(cfg.KeystoreURL, "postgresql://") {
			errs = append(errs, errors.New("keystore must be a postgres:// or postgresql:// URL"))
		}
		if cfg.Keyring != "" {
			errs = append(errs, errors.New("keystore and keyring exclude each other"))
		}
	}
	if cfg.Keyring != "" {
		if _, err := os.Stat(cfg.Keyring); err != nil {
			errs = append(errs, fmt.Errorf("keyring: %v", err))
		}
	}
	return errors.Join(errs...)
}

// validateJWTIssuers checks the issuers' settings one by one; the
// identities that name them are checked with the other identities
// (buildAuth).
func validateJWTIssuers(issuers []JWTIssuerConfig) []error {
	var errs []error
	seen := map[string]bool{}
	for _, ic := range issuers {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("jwt_issuers: issuer %q: "+format, append([]any{ic.Issuer}, args...)...))
		}
		switch {
		case ic.Issuer == "":
			errs = append(errs, errors.New("jwt_issuers: an issuer has no issuer"))
			continue
		case seen[ic.Issuer]:
			bad("listed twice")
		}
		seen[ic.Issuer] = true
		if len(ic.Audiences) == 0 || slices.Contains(ic.Audiences, "") {
			bad("audiences: want one or more, none empty")
		}
		if ic.JWKSURL != "" && ic.JWKSFile != "" {
			bad("jwks_url and jwks_file exclude each other")
		}
		if ic.JWKSFile != "" {
			if ic.CAFile != "" {
				bad("ca_file is for jwks_url or discovery, not jwks_file")
			}
			continue
		}
		// Keys fetched over the network: a network attacker who could
		// answer in the issuer's place would choose every caller's
		// identity.
		fetched, name := ic.JWKSURL, "jwks_url"
		if fetched == "" {
			fetched, name = ic.Issuer, "issuer (for discovery)"
		}
		if u, err := url.Parse(fetched); err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			bad("%s: want an https URL without query or fragment", name)
		}
	}
	return errs
}
