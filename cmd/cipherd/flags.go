package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/cipherd/cipherd/server"
)

// serveFlags are the flags of `cipherd serve`. Each overrides the file and
// the environment.
type serveFlags struct {
	config, addr, dataDir, keyring, aead, logLevel, fail string
	skipBenchmark                                        bool
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", os.Getenv("CIPHERD_CONFIG"), "YAML configuration `file` (CIPHERD_CONFIG); see deploy/cipherd.yaml")
	fs.StringVar(&f.addr, "addr", "", "listen `address`")
	fs.StringVar(&f.dataDir, "data-dir", "", "data `directory`")
	fs.StringVar(&f.keyring, "keyring", "", "read-only keyring `file` instead of the file keystore")
	fs.StringVar(&f.aead, "aead", "", "pin the `AEAD` for new data")
	fs.BoolVar(&f.skipBenchmark, "skip-benchmark", false, "choose the AEAD by preference, without the start-up profile")
	fs.StringVar(&f.logLevel, "log-level", "", "`level` of the logs: debug, info, warn or error (default info)")
	fs.StringVar(&f.fail, "fail", "", "fail the named KATs, implementations or ciphers on purpose (comma-separated `names`, * for all), as cipherd selftest -fail")
}

// apply sets what the flags give over cfg (read from the file and the
// environment).
func (f *serveFlags) apply(cfg *server.Config) {
	for _, o := range []struct {
		v string
		p *string
	}{{f.addr, &cfg.Addr}, {f.dataDir, &cfg.DataDir}, {f.keyring, &cfg.Keyring}, {f.aead, &cfg.AEAD}, {f.logLevel, &cfg.LogLevel}, {f.fail, &cfg.SelftestFail}} {
		if o.v != "" {
			*o.p = o.v
		}
	}
	cfg.SkipBenchmark = cfg.SkipBenchmark || f.skipBenchmark
}

// A setting is one entry of `cipherd serve -h`: a field of server.Config,
// named by its YAML key, or one that only the environment or a flag sets.
// The default shown is server.Config's own (Defaults), so it cannot drift;
// zero says what the zero value means when that is the default.
type setting struct {
	key, env, flag string
	zero           string
	help           string
}

// serveSettings lists every setting; TestServeSettingsComplete checks it
// against server.Config's YAML keys, the variables ApplyEnv reads and the
// flags.
var serveSettings = []setting{
	{key: "version", zero: "1", help: "configuration file format: 0 or 1"},
	{key: "addr", env: "CIPHERD_ADDR", flag: "addr", help: "address to listen on, host:port (:8080 in a container)"},
	{key: "tls_cert", env: "CIPHERD_TLS_CERT", zero: "none (plain HTTP)", help: "PEM certificate chain; with tls_key the server speaks TLS only and reloads both when they change"},
	{key: "tls_key", env: "CIPHERD_TLS_KEY", zero: "none", help: "PEM private key of tls_cert"},
	{key: "tls_client_ca", env: "CIPHERD_TLS_CLIENT_CA", zero: "none (no client certificates)", help: "PEM CA bundle that signs client certificates (mTLS identities); needs tls_cert"},
	{key: "data_dir", env: "CIPHERD_DATA_DIR", flag: "data-dir", help: "holds the file keystore, the hashed admin token and the speed cache; created 0700"},
	{key: "keystore", env: "CIPHERD_KEYSTORE", zero: "none (the file keystore in data_dir)", help: "postgres:// URL of a PostgreSQL keystore shared by every replica using it (libpq conventions: PGPASSWORD, PGPASSFILE and the other PG* variables fill in what it leaves out); needs a root key; excludes keyring"},
	{key: "root_key_file", env: "CIPHERD_ROOT_KEY_FILE", zero: "CIPHERD_ROOT_KEY, else a development key in data_dir (with a warning)", help: "file with the 32-byte root key (base64 or hex) that encrypts the keystore at rest; or the key itself in CIPHERD_ROOT_KEY"},
	{env: "CIPHERD_ROOT_KEY", zero: "none", help: "the root key itself (base64 or hex), instead of root_key_file"},
	{key: "root_key_uri", env: "CIPHERD_ROOT_KEY_URI", zero: "root_key_file", help: "the root-key provider instead of root_key_file: pkcs11:… (RFC 7512 URI of a key in a PKCS#11 token; PIN from pin-source=file:… or CIPHERD_PKCS11_PIN) or file:<path>"},
	{key: "backup_key_file", env: "CIPHERD_BACKUP_KEY_FILE", zero: "none (key backups sealed under the root key only)", help: "file with the 32-byte backup key (raw, base64 or hex) that seals key backups by default, so that a fleet with another root key and the same backup key restores them"},
	{key: "keyring", env: "CIPHERD_KEYRING", flag: "keyring", zero: "none (the file keystore in data_dir)", help: "read-only keyring file (a mounted Secret) used instead of the file keystore; reloaded when it changes"},
	{key: "default_key", env: "CIPHERD_DEFAULT_KEY", help: `key created on first start when missing; "-" for none`},
	{key: "min_rotation_period", env: "CIPHERD_MIN_ROTATION_PERIOD", help: "shortest rotation_period a key may be given (shorter: 400 invalid_config); due rotations are looked for every minute, or every min_rotation_period if shorter"},
	{key: "fleet_interval", env: "CIPHERD_FLEET_INTERVAL", help: "how often a replica on a shared keystore publishes its host report for GET /speed/fleet; silent for three intervals, it drops out; at least 1s"},
	{key: "usage_flush_interval", env: "CIPHERD_USAGE_FLUSH_INTERVAL", help: "how often the usage counted per key version is added to the keystore, in one write (and at shutdown); at least 100ms"},
	{key: "key_deletion_min_wait", env: "CIPHERD_KEY_DELETION_MIN_WAIT", help: "shortest wait a scheduled key deletion (DELETE /v1/keys/KEY?wait=…) may ask for (shorter: 400 invalid_deletion_wait)"},
	{key: "key_deletion_default_wait", env: "CIPHERD_KEY_DELETION_DEFAULT_WAIT", help: "wait of a key deletion that asks for none; at least key_deletion_min_wait"},
	{key: "allow_immediate_key_deletion", env: "CIPHERD_ALLOW_IMMEDIATE_KEY_DELETION", zero: "false", help: "let DELETE /v1/keys/KEY?wait=0 delete a key at once (otherwise 403 immediate_deletion_disallowed)"},
	{key: "max_token_ttl", help: "longest ttl a service token may be issued with (POST /v1/tokens); without one a token lives 24h, or this if shorter; at least 1m"},
	{env: "CIPHERD_ADMIN_TOKEN", zero: "generated on first start, printed once, stored hashed", help: "the admin's bearer token (never read from the file)"},
	{key: "identities", zero: "none", help: "API clients besides the admin: name, token_sha256, cert_sha256 or jwt (issuer and claims), policies (file only)"},
	{key: "policies", zero: "none", help: "named allow and deny rules of operations on key-name patterns; deny wins (file only)"},
	{key: "jwt_issuers", zero: "none", help: "issuers whose JWTs identify callers: issuer, audiences, and jwks_file, jwks_url or OIDC discovery, ca_file (file only)"},
	{key: "jwt_clock_skew", help: "leeway on a JWT's exp, nbf and iat; at most 5m"},
	{key: "jwt_refresh_interval", help: "how often each JWT issuer's keys are fetched again; 1m to 24h"},
	{key: "trusted_proxies", env: "CIPHERD_TRUSTED_PROXIES", zero: "none", help: "CIDRs of proxies whose X-Forwarded-Client-Cert, and PROXY protocol header with proxy_protocol, are believed (comma-separated in the variable)"},
	{key: "proxy_protocol", env: "CIPHERD_PROXY_PROTOCOL", zero: "false", help: "read the PROXY protocol header (v1 or v2) on connections from trusted_proxies and take the client address from it; needs trusted_proxies"},
	{key: "rate_limit", env: "CIPHERD_RATE_LIMIT", zero: "0 (no limit)", help: "sustained requests per second per identity; over it 429 with Retry-After"},
	{key: "rate_burst", zero: "2 × rate_limit, at least 1", help: "burst above rate_limit"},
	{key: "auth_failure_rate", env: "CIPHERD_AUTH_FAILURE_RATE", help: "failed authentications per second allowed per client address (IPv4, or IPv6 /64); over it every request from the address, a good credential's too, is refused 429 auth_rate_limited with Retry-After before its credential is looked at; -1: no limit (behind a proxy all clients share)"},
	{key: "auth_failure_burst", help: "failed authentications an address may make at once above auth_failure_rate"},
	{key: "aead", env: "CIPHERD_AEAD", flag: "aead", zero: "the fastest correct one measured at start-up", help: "pin the AEAD for new data: aes-128-gcm, aes-256-gcm or chacha20-poly1305"},
	{key: "allowed_aeads", env: "CIPHERD_ALLOWED_AEADS", zero: "aes-256-gcm,chacha20-poly1305", help: "the AEADs the selection may choose for new data; add aes-128-gcm to allow it (comma-separated in the variable)"},
	{key: "compare_openssl", env: "CIPHERD_COMPARE_OPENSSL", zero: "none: no comparison", help: "an openssl binary (path or name) to measure the AEAD in use with after the quick start-up table, for /speed's summary"},
	{key: "skip_benchmark", env: "CIPHERD_SKIP_BENCHMARK", flag: "skip-benchmark", zero: "false", help: "choose the AEAD by order of preference without the start-up profile; the self-tests still run"},
	{env: "CIPHERD_SELFTEST_FAIL", flag: "fail", zero: "none", help: "fail the named KATs, implementations or ciphers on purpose (see cipherd selftest -h); an unknown name is refused"},
	{key: "max_json_body", help: "largest JSON request body, in bytes"},
	{key: "max_batch_items", help: "most items in one batch"},
	{key: "max_verify_full", help: "largest stream decrypt ?verify=full buffers, in bytes"},
	{key: "verify_full_budget", help: "bytes all ?verify=full decrypts together may buffer; over it 503 verify_full_busy"},
	{key: "local_seal_max_age", help: "longest a client seals locally with one sealing key"},
	{key: "local_seal_max_messages", help: "most messages a client seals locally with one sealing key"},
	{key: "local_seal_max_bytes", help: "most plaintext bytes a client seals locally with one sealing key"},
	{key: "max_streams_per_identity", help: "streaming requests one identity may have in flight (-1: no limit); over it 429 too_many_streams"},
	{key: "request_timeout", help: "bound on reading a request's headers and JSON body"},
	{key: "stream_idle_timeout", help: "a streaming request that moves no byte for this long is ended"},
	{key: "shutdown_timeout", help: "bound on the drain on SIGTERM"},
	{key: "drain_delay", zero: "0s", help: "serve with readiness off for this long before closing the listener, so load balancers notice first"},
	{key: "io_buffer_size", help: "read and write buffer per connection, in bytes"},
	{key: "max_connections", help: "connections held open at once (-1: no limit); at the limit no more are accepted until one closes"},
	{key: "audit_log", env: "CIPHERD_AUDIT_LOG", help: "the audit trail: a file path (appended to, each record synced before its answer; reopened on SIGHUP) or stderr"},
	{key: "protect_info_routes", env: "CIPHERD_PROTECT_INFO_ROUTES", zero: "false", help: "put /metrics, /speed, /speed/fleet, /version, /v1/api and /v1/openapi.json behind a credential allowed info-read (\"*\" grants it); /healthz and /readyz stay open"},
	{key: "audit_fail_open", env: "CIPHERD_AUDIT_FAIL_OPEN", zero: "false", help: "answer requests whose audit record cannot be written (counted in cipherd_audit_failures_total, logged at error) instead of refusing them with 503 audit_unavailable"},
	{key: "log_level", env: "CIPHERD_LOG_LEVEL", flag: "log-level", help: "level of the JSON logs on standard error: debug, info, warn or error; reloads"},
	{flag: "config", env: "CIPHERD_CONFIG", zero: "none", help: "the YAML configuration file; unknown keys are refused"},
}

// serveUsage writes `cipherd serve -h`: the flags, then every setting with
// its key, variable, flag and default.
func serveUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `usage: cipherd serve [flags]

Runs the service: the known-answer self-tests, the cipher profile, then HTTP
(or HTTPS) on the listen address. Each setting takes, from lowest precedence
to highest, its default, its key in the YAML file given by -config, its
CIPHERD_* environment variable, and its flag. Durations are Go durations
("500ms", "15s"); sizes are bytes. deploy/cipherd.yaml shows every key, and
docs/OPERATIONS.md explains them.

flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, "\nsettings (file key, environment variable, flag; what it does, its default):\n")
	defaults := reflect.ValueOf(server.Config{}.Defaults())
	for _, s := range serveSettings {
		var cols []string
		for _, c := range []string{s.key, s.env, flagName(s.flag)} {
			if c != "" {
				cols = append(cols, c)
			}
		}
		fmt.Fprintf(w, "  %s\n", strings.Join(cols, "  "))
		help := strings.ToUpper(s.help[:1]) + s.help[1:] + ". Default: " + settingDefault(defaults, s) + "."
		for _, line := range wrap(help, 72) {
			fmt.Fprintf(w, "      %s\n", line)
		}
	}
}

func flagName(f string) string {
	if f == "" {
		return ""
	}
	return "-" + f
}

// settingDefault formats the default of s: server.Config's when it is not
// the zero value, else what the zero value means.
func settingDefault(defaults reflect.Value, s setting) string {
	if s.key != "" {
		if v, ok := configField(defaults, s.key); ok && !v.IsZero() {
			return formatDefault(s.key, v)
		}
	}
	if s.zero != "" {
		return s.zero
	}
	return "none"
}

// configField returns the field of a server.Config with the YAML key.
func configField(cfg reflect.Value, key string) (reflect.Value, bool) {
	t := cfg.Type()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name == key {
			return cfg.Field(i), true
		}
	}
	return reflect.Value{}, false
}

func formatDefault(key string, v reflect.Value) string {
	switch x := v.Interface().(type) {
	case time.Duration:
		return x.String()
	case int, int64:
		n := v.Int()
		if strings.HasSuffix(key, "_body") || strings.HasSuffix(key, "_full") || strings.HasSuffix(key, "_size") {
			return fmt.Sprintf("%d (%s)", n, iecBytes(float64(n)))
		}
		return fmt.Sprint(n)
	case []string:
		return strings.Join(x, ",")
	}
	return fmt.Sprint(v.Interface())
}

// wrap breaks text into lines of at most width bytes at spaces (a longer
// word has a line of its own).
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
