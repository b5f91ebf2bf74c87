package server

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// defaultTLSPoll is how often the certificate, key and client CA files are
// checked for changes.
const defaultTLSPoll = 5 * time.Second

// tls12Suites are the TLS 1.2 cipher suites: ECDHE key exchange with an AEAD
// only. (TLS 1.3 suites are not configurable and all qualify.)
var tls12Suites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// tlsState is the server's TLS configuration. The certificate and the client
// CA pool live behind atomic pointers; a poller reloads them when their files
// change (a Kubernetes Secret update, a cert-manager renewal), and a broken
// replacement leaves the previous one in service.
type tlsState struct {
	log                       *zap.Logger
	certFile, keyFile, caFile string
	base                      *tls.Config // what config returns

	cert      atomic.Pointer[tls.Certificate]
	perClient atomic.Pointer[tls.Config] // with the current client CA; nil without one

	mu               sync.Mutex        // serializes reload
	certSum, caSum   [sha256.Size]byte // of the files in service
	certFail, caFail [sha256.Size]byte // of the last broken files logged
	pollEvery        time.Duration     // set before the poller starts; tests change it with setPollInterval
	every            chan time.Duration
	stop, done       chan struct{}
	closeOnce        sync.Once
}

func newTLSState(cfg *Config, log *zap.Logger) (*tlsState, error) {
	t := &tlsState{
		log:       log,
		certFile:  cfg.TLSCert,
		keyFile:   cfg.TLSKey,
		caFile:    cfg.TLSClientCA,
		pollEvery: defaultTLSPoll,
		every:     make(chan time.Duration),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	if err := t.reload(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	// Each handshake takes the configuration with the current client CA
	// pool, or base itself (nil) when there is none: Reload may add or
	// remove the client CA.
	t.base = t.newConfig(nil)
	t.base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return t.perClient.Load(), nil }
	go t.poll(t.pollEvery)
	return t, nil
}

// config returns the listener's TLS configuration: TLS 1.2 minimum (1.3
// negotiated whenever the client has it), ECDHE+AEAD suites for 1.2, the
// current certificate, and, with a client CA, client certificates requested
// and verified when given, so that bearer-token clients without one still
// connect.
func (t *tlsState) config() *tls.Config { return t.base }

// newConfig returns a configuration with the current certificate and, with
// a pool, client certificates verified against it when given.
func (t *tlsState) newConfig(clientCAs *x509.CertPool) *tls.Config {
	c := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		CipherSuites:   tls12Suites,
		GetCertificate: t.getCertificate,
		NextProtos:     []string{"http/1.1"},
	}
	if clientCAs != nil {
		c.ClientAuth = tls.VerifyClientCertIfGiven
		c.ClientCAs = clientCAs
	}
	return c
}

func (t *tlsState) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return t.cert.Load(), nil
}

// close stops the poller.
func (t *tlsState) close() {
	t.closeOnce.Do(func() { close(t.stop) })
	<-t.done
}

// setPollInterval changes how often the files are checked, from the next
// check on.
func (t *tlsState) setPollInterval(d time.Duration) {
	select {
	case t.every <- d:
	case <-t.done:
	}
}

func (t *tlsState) poll(every time.Duration) {
	defer close(t.done)
	timer := time.NewTimer(every)
	defer timer.Stop()
	for {
		select {
		case <-t.stop:
			return
		case every = <-t.every:
		case <-timer.C:
			t.reload()
		}
		timer.Reset(every)
	}
}

// reload loads the certificate pair and the client CA when their files
// changed since the last load. On start-up (nothing in service yet) an error
// is fatal; later it is logged once per broken version of the files and the
// previous certificate or CA stays in service.
func (t *tlsState) reload() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	first := t.cert.Load() == nil
	var errs []error

	certPEM, err1 := os.ReadFile(t.certFile)
	keyPEM, err2 := os.ReadFile(t.keyFile)
	sum := fileSum(certPEM, keyPEM)
	if err := errors.Join(err1, err2); err != nil {
		errs = append(errs, t.failed(first, &t.certFail, fileSum([]byte(err.Error())), "TLS certificate", err))
	} else if sum == t.certSum {
		t.certFail = [sha256.Size]byte{}
	} else {
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err == nil && cert.Leaf == nil {
			cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0])
		}
		if err != nil {
			errs = append(errs, t.failed(first, &t.certFail, sum, "TLS certificate", err))
		} else {
			t.cert.Store(&cert)
			t.certSum = sum
			t.loaded(first, cert.Leaf)
		}
	}
	clear(keyPEM)

	if t.caFile != "" {
		caPEM, err := os.ReadFile(t.caFile)
		sum := fileSum(caPEM)
		switch {
		case err != nil:
			errs = append(errs, t.failed(first, &t.caFail, fileSum([]byte(err.Error())), "TLS client CA", err))
		case sum == t.caSum:
			t.caFail = [sha256.Size]byte{}
		default:
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(caPEM) {
				errs = append(errs, t.failed(first, &t.caFail, sum, "TLS client CA", fmt.Errorf("%s holds no PEM certificate", t.caFile)))
				break
			}
			t.perClient.Store(t.newConfig(pool))
			if !first {
				t.log.Info("TLS client CA reloaded", zap.String("file", t.caFile))
			}
			t.caSum = sum
		}
	}
	return errors.Join(errs...)
}

// setFiles puts new certificate, key and client CA files (caFile may be
// empty: no client certificates) in service and polls them from then on.
// It reads them even when the names are the ones in service, and changes
// nothing unless all of them load.
func (t *tlsState) setFiles(certFile, keyFile, caFile string) error {
	certPEM, err1 := os.ReadFile(certFile)
	keyPEM, err2 := os.ReadFile(keyFile)
	defer clear(keyPEM)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("TLS certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err == nil && cert.Leaf == nil {
		cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0])
	}
	if err != nil {
		return fmt.Errorf("TLS certificate: %w", err)
	}
	var pool *x509.CertPool
	var caSum [sha256.Size]byte
	if caFile != "" {
		caPEM, err := os.ReadFile(caFile)
		if err != nil {
			return fmt.Errorf("TLS client CA: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return fmt.Errorf("TLS client CA: %s holds no PEM certificate", caFile)
		}
		caSum = fileSum(caPEM)
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	sum := fileSum(certPEM, keyPEM)
	changed := sum != t.certSum || certFile != t.certFile
	t.certFile, t.keyFile, t.caFile = certFile, keyFile, caFile
	t.cert.Store(&cert)
	t.certSum, t.certFail = sum, [sha256.Size]byte{}
	if changed {
		t.loaded(false, cert.Leaf)
	}
	if pool == nil {
		t.perClient.Store(nil)
	} else if caSum != t.caSum || t.perClient.Load() == nil {
		t.perClient.Store(t.newConfig(pool))
		t.log.Info("TLS client CA loaded", zap.String("file", caFile))
	}
	t.caSum, t.caFail = caSum, [sha256.Size]byte{}
	return nil
}

// failed reports a load error: returned on start-up, else logged once per
// version of the files (sum) while the previous one stays in service.
func (t *tlsState) failed(first bool, last *[sha256.Size]byte, sum [sha256.Size]byte, what string, err error) error {
	err = fmt.Errorf("%s: %w", what, err)
	if !first && *last != sum {
		*last = sum
		t.log.Error(what+" files changed but do not load; the previous one stays in service", zap.Error(err))
	}
	return err
}

func (t *tlsState) loaded(first bool, leaf *x509.Certificate) {
	fields := []zap.Field{zap.String("file", t.certFile), zap.String("serial", leaf.SerialNumber.String()), zap.Time("not_after", leaf.NotAfter)}
	if now := time.Now(); now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		t.log.Warn("the TLS certificate is outside its validity period", fields...)
	}
	if first {
		t.log.Info("TLS certificate loaded", fields...)
	} else {
		t.log.Info("TLS certificate reloaded", fields...)
	}
}

// fileSum hashes file contents, each prefixed with its length.
func fileSum(files ...[]byte) [sha256.Size]byte {
	h := sha256.New()
	for _, f := range files {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(f))))
		h.Write(f)
	}
	return [sha256.Size]byte(h.Sum(nil))
}
