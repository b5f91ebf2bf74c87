package server

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// The public keys of the JWT issuers (jwt_issuers): JSON Web Key Sets
// (RFC 7517) from an issuer's OpenID Connect discovery document, from a
// JWKS URL, or from a file, held in memory. Requests read the keys held
// and do not wait for the network, except for a token that names a key
// not held: then the issuer's keys are fetched again, at most once per
// jwksMissInterval, and the requests that miss meanwhile share that one
// fetch. refreshJWKS fetches every issuer's keys again on a schedule. A
// fetch that fails keeps the keys held, so an issuer that is down stops
// the rotation of its keys, not the callers whose tokens it signed.

const (
	// jwksFetchTimeout bounds one fetch, discovery and key set together.
	jwksFetchTimeout = 10 * time.Second
	// jwksMaxBytes bounds a discovery document, a key set and its file.
	jwksMaxBytes = 1 << 20
	// jwksMaxKeys bounds the keys held per issuer.
	jwksMaxKeys = 100
	// jwksMissInterval spaces the fetches that tokens naming unknown keys
	// cause, per issuer: a flood of tokens with made-up kids costs the
	// issuer one request per interval.
	jwksMissInterval = 10 * time.Second
	// jwksMinRSABits is the smallest RSA key held.
	jwksMinRSABits = 2048
)

// jwk is a public key of an issuer, to verify its tokens with.
type jwk struct {
	kid string
	alg jose.SignatureAlgorithm // the JWK's alg; "" when it names none
	key crypto.PublicKey        // *rsa.PublicKey, *ecdsa.PublicKey (P-256, P-384) or ed25519.PublicKey
}

// fits reports whether k may verify a signature made with alg: the key's
// type is alg's, and so is its own alg when it names one. Without this
// check a key would verify whatever algorithm a token's header claims.
func (k *jwk) fits(alg jose.SignatureAlgorithm) bool {
	if k.alg != "" && k.alg != alg {
		return false
	}
	switch pub := k.key.(type) {
	case *rsa.PublicKey:
		return alg == jose.RS256 || alg == jose.PS256
	case *ecdsa.PublicKey:
		return alg == jose.ES256 && pub.Curve == elliptic.P256() || alg == jose.ES384 && pub.Curve == elliptic.P384()
	case ed25519.PublicKey:
		return alg == jose.EdDSA
	}
	return false
}

// jwkSet is the keys held for an issuer; immutable once stored.
type jwkSet struct {
	byKid map[string][]*jwk
	n     int
}

// find returns the key named kid that may verify alg, or nil.
func (s *jwkSet) find(kid string, alg jose.SignatureAlgorithm) *jwk {
	if s == nil {
		return nil
	}
	for _, k := range s.byKid[kid] {
		if k.fits(alg) {
			return k
		}
	}
	return nil
}

// holds reports whether k is still one of the keys.
func (s *jwkSet) holds(k *jwk) bool {
	if s == nil {
		return false
	}
	for _, h := range s.byKid[k.kid] {
		if h == k {
			return true
		}
	}
	return false
}

// parseJWKS parses a JSON Web Key Set and keeps its public signing keys
// of the algorithms jwtAlgorithms allows. Keys are parsed one by one, so
// that a key of a type go-jose does not know (an issuer may publish keys
// for other verifiers too) leaves the others usable. A key that old holds
// unchanged keeps its pointer, so that the tokens it verified stay
// remembered (jwtCache) and a fetch that changes nothing is seen as such
// (sameKeys).
func parseJWKS(b []byte, old *jwkSet) (*jwkSet, error) {
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("not a JSON Web Key Set: %v", err)
	}
	set := &jwkSet{byKid: map[string][]*jwk{}}
	skipped := 0
	for _, r := range raw.Keys {
		k, ok := usableJWK(r)
		if !ok || set.n == jwksMaxKeys {
			skipped++
			continue
		}
		if old != nil {
			for _, o := range old.byKid[k.kid] {
				if o.alg == k.alg && o.key.(interface{ Equal(crypto.PublicKey) bool }).Equal(k.key) {
					k = o
					break
				}
			}
		}
		set.byKid[k.kid] = append(set.byKid[k.kid], k)
		set.n++
	}
	if set.n == 0 {
		return nil, fmt.Errorf("no usable signing key among %d", len(raw.Keys))
	}
	return set, nil
}

// usableJWK parses one key and reports whether it may verify tokens: a
// public key with a kid, for signatures, of a type and size jwtAlgorithms
// allows. Symmetric ("oct") keys never are: whatever a key set says, no
// HMAC algorithm is accepted.
func usableJWK(raw []byte) (*jwk, bool) {
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON(raw); err != nil {
		return nil, false
	}
	if k.KeyID == "" || k.Use != "" && k.Use != "sig" || !k.IsPublic() || !k.Valid() {
		return nil, false
	}
	alg := jose.SignatureAlgorithm(k.Algorithm)
	if alg != "" && !jwtAlgorithmAllowed(alg) {
		return nil, false
	}
	switch pub := k.Key.(type) {
	case *rsa.PublicKey:
		if pub.N.BitLen() < jwksMinRSABits {
			return nil, false
		}
	case *ecdsa.PublicKey:
		if pub.Curve != elliptic.P256() && pub.Curve != elliptic.P384() {
			return nil, false
		}
	case ed25519.PublicKey:
	default:
		return nil, false
	}
	return &jwk{kid: k.KeyID, alg: alg, key: k.Key}, true
}

// jwksSource is where an issuer's keys come from, and the keys held. A
// reload makes new sources; one for an issuer whose keys are where they
// were takes the keys its predecessor held.
type jwksSource struct {
	issuer string
	url    string // jwks_url; "" with file means discovery
	file   string // jwks_file
	client *http.Client
	keys   atomic.Pointer[jwkSet]
	misses *rate.Limiter // fetches for unknown kids; shared across reloads

	mu      sync.Mutex
	pending *jwksFetch // the fetch queued or in flight; nil for none
	queued  bool       // pending waits for refreshJWKS (or a miss) to run it
}

// jwksFetch is one fetch; done closes when it ends.
type jwksFetch struct{ done chan struct{} }

// sameSource reports whether a source for ic gets its keys where src does.
func (src *jwksSource) sameSource(ic *JWTIssuerConfig) bool {
	return src.issuer == ic.Issuer && src.url == ic.JWKSURL && src.file == ic.JWKSFile
}

// newJWKSSource makes the source of ic's keys; with prev (the source in
// service for the same issuer and location), it starts with the keys prev
// holds.
func newJWKSSource(ic *JWTIssuerConfig, prev *jwksSource) (*jwksSource, error) {
	src := &jwksSource{issuer: ic.Issuer, url: ic.JWKSURL, file: ic.JWKSFile}
	if prev != nil {
		src.keys.Store(prev.keys.Load())
		src.misses = prev.misses
	} else {
		src.misses = rate.NewLimiter(rate.Every(jwksMissInterval), 1)
	}
	if src.file != "" {
		return src, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if ic.CAFile != "" {
		pem, err := os.ReadFile(ic.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s holds no PEM certificate", ic.CAFile)
		}
	}
	src.client = &http.Client{
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			TLSClientConfig:     tc,
			TLSHandshakeTimeout: jwksFetchTimeout,
			MaxIdleConnsPerHost: 1,
			IdleConnTimeout:     30 * time.Second,
		},
		Timeout: jwksFetchTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 3 || req.URL.Scheme != "https" {
				return errors.New("redirected too often, or away from https")
			}
			return nil
		},
	}
	return src, nil
}

// queue marks a fetch for refreshJWKS to run, unless one is pending.
func (src *jwksSource) queue() {
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.pending == nil {
		src.pending = &jwksFetch{done: make(chan struct{})}
		src.queued = true
	}
}

// take returns a fetch for the caller to run: the queued one, or, when
// due, a new one unless one is in flight; else nil.
func (src *jwksSource) take(due bool) *jwksFetch {
	src.mu.Lock()
	defer src.mu.Unlock()
	switch {
	case src.queued:
		src.queued = false
		return src.pending
	case due && src.pending == nil:
		src.pending = &jwksFetch{done: make(chan struct{})}
		return src.pending
	}
	return nil
}

// miss returns the fetch that a token naming a key not held waits for:
// the one in flight (run false), or one for the caller to run (run true):
// the queued one, or a new one if the miss rate allows it at now. nil
// means no fetch.
func (src *jwksSource) miss(now time.Time) (f *jwksFetch, run bool) {
	src.mu.Lock()
	defer src.mu.Unlock()
	switch {
	case src.queued:
		src.queued = false
		return src.pending, true
	case src.pending != nil:
		return src.pending, false
	case !src.misses.AllowN(now, 1):
		return nil, false
	}
	src.pending = &jwksFetch{done: make(chan struct{})}
	return src.pending, true
}

// end ends f, pending or not.
func (src *jwksSource) end(f *jwksFetch) {
	src.mu.Lock()
	if src.pending == f {
		src.pending, src.queued = nil, false
	}
	src.mu.Unlock()
	close(f.done)
}

// load reads the key set: the file, or the JWKS URL, or the one that
// discovery names.
func (src *jwksSource) load(ctx context.Context, old *jwkSet) (*jwkSet, error) {
	var b []byte
	var err error
	switch {
	case src.file != "":
		b, err = readFileMax(src.file, jwksMaxBytes)
	case src.url != "":
		b, err = src.get(ctx, src.url)
	default:
		var u string
		if u, err = src.discover(ctx); err == nil {
			b, err = src.get(ctx, u)
		}
	}
	if err != nil {
		return nil, err
	}
	return parseJWKS(b, old)
}

// discover returns the jwks_uri of the issuer's OpenID Connect discovery
// document, which must name the issuer exactly (OpenID Connect Discovery
// 1.0, section 4.3).
func (src *jwksSource) discover(ctx context.Context) (string, error) {
	b, err := src.get(ctx, strings.TrimSuffix(src.issuer, "/")+"/.well-known/openid-configuration")
	if err != nil {
		return "", err
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return "", fmt.Errorf("discovery document: %v", err)
	}
	if doc.Issuer != src.issuer {
		return "", fmt.Errorf("the discovery document names issuer %q", doc.Issuer)
	}
	if u, err := url.Parse(doc.JWKSURI); err != nil || u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("the discovery document's jwks_uri %q is not an https URL", doc.JWKSURI)
	}
	return doc.JWKSURI, nil
}

// get fetches u, which must answer 200 with at most jwksMaxBytes.
func (src *jwksSource) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := src.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", u, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, jwksMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if len(b) > jwksMaxBytes {
		return nil, fmt.Errorf("GET %s: more than %d bytes", u, jwksMaxBytes)
	}
	return b, nil
}

// readFileMax reads a file of at most max bytes.
func readFileMax(name string, max int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: more than %d bytes", name, max)
	}
	return b, nil
}

// fetchJWKS runs f: it loads src's keys and holds them, or keeps those
// held when that fails.
func (s *Server) fetchJWKS(ctx context.Context, src *jwksSource, f *jwksFetch) {
	defer src.end(f)
	ctx, cancel := context.WithTimeout(ctx, jwksFetchTimeout)
	defer cancel()
	old := src.keys.Load()
	set, err := src.load(ctx, old)
	if err != nil {
		s.met.jwksFailure(src.issuer)
		held := 0
		if old != nil {
			held = old.n
		}
		s.log.Warn("loading the keys of a JWT issuer failed; the keys held stay in use",
			zap.String("issuer", src.issuer), zap.Int("keys_held", held), zap.Error(err))
		return
	}
	src.keys.Store(set)
	if !sameKeys(old, set) {
		s.log.Info("keys of a JWT issuer loaded", zap.String("issuer", src.issuer), zap.Int("keys", set.n))
	}
}

// sameKeys reports whether b holds exactly a's keys.
func sameKeys(a, b *jwkSet) bool {
	if a == nil || a.n != b.n {
		return false
	}
	for _, ks := range b.byKid {
		for _, k := range ks {
			if !a.holds(k) {
				return false
			}
		}
	}
	return true
}

// jwksMiss fetches src's keys again for a token that names a key not
// held, if a fetch is pending or the miss rate allows one, and reports
// whether a fetch ended meanwhile.
func (s *Server) jwksMiss(src *jwksSource, now time.Time) bool {
	f, run := src.miss(now)
	switch {
	case f == nil:
		return false
	case run:
		s.fetchJWKS(s.bgCtx, src, f)
		return true
	}
	t := time.NewTimer(jwksFetchTimeout + time.Second)
	defer t.Stop()
	select {
	case <-f.done:
		return true
	case <-t.C:
		return false
	}
}

// startJWKS loads the keys of a's issuers that come from files, at once,
// and queues a fetch for those fetched over the network that hold none,
// for refreshJWKS. A start or a reload reads the files again; a reload
// keeps the keys fetched for an issuer whose keys are where they were.
func (s *Server) startJWKS(a *authState) {
	if a.jwt == nil {
		return
	}
	for _, iss := range a.jwt.issuers {
		src := iss.src
		switch {
		case src.file != "":
			if f := src.take(true); f != nil {
				s.fetchJWKS(s.bgCtx, src, f)
			}
		case src.keys.Load() == nil:
			src.queue()
		}
	}
	select {
	case s.jwksKick <- struct{}{}:
	default:
	}
}

// refreshJWKS runs until ctx ends: the fetches startJWKS queues, and a
// fetch of every issuer's keys each jwt_refresh_interval.
func (s *Server) refreshJWKS(ctx context.Context) {
	timer := time.NewTimer(s.auth().jwtRefresh)
	defer timer.Stop()
	due := false
	for {
		var wg sync.WaitGroup
		if j := s.auth().jwt; j != nil {
			for _, iss := range j.issuers {
				if f := iss.src.take(due); f != nil {
					wg.Go(func() { s.fetchJWKS(ctx, iss.src, f) })
				}
			}
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return
		case <-s.jwksKick:
			due = false
		case <-timer.C:
			due = true
			timer.Reset(s.auth().jwtRefresh)
		}
	}
}
