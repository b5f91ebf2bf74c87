package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"go.uber.org/zap"
)

// tlsState holds the server's TLS configuration.
type tlsState struct {
	cert *tls.Certificate
	pool *x509.CertPool
}

func newTLSState(cfg *Config, log *zap.Logger) (*tlsState, error) {
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("server: TLS certificate: %w", err)
	}
	t := &tlsState{cert: &cert}
	if cfg.TLSClientCA != "" {
		pem, err := os.ReadFile(cfg.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("server: client CA: %w", err)
		}
		t.pool = x509.NewCertPool()
		if !t.pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("server: client CA %s holds no certificate", cfg.TLSClientCA)
		}
	}
	return t, nil
}

func (t *tlsState) config() *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*t.cert}}
	if t.pool != nil {
		c.ClientCAs = t.pool
		c.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return c
}

func (t *tlsState) close() {}
