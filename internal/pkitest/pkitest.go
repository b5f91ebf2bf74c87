// Package pkitest makes a small certificate authority for tests: a CA, a
// server certificate for the loopback address, and client certificates
// for mTLS identities, each with its PEM files written where a server or a
// command reads them.
package pkitest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Cert is a certificate, its P-256 key and the PEM files that hold them.
type Cert struct {
	Leaf     *x509.Certificate
	CertFile string // PEM CERTIFICATE
	KeyFile  string // PEM PRIVATE KEY (PKCS #8), mode 0600

	key *ecdsa.PrivateKey
}

// SPKI returns the hex SHA-256 of the certificate's SubjectPublicKeyInfo:
// what an identity's cert_sha256 holds.
func (c *Cert) SPKI() string {
	h := sha256.Sum256(c.Leaf.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(h[:])
}

// CA is a certificate authority whose files live in a test's temporary
// directory.
type CA struct {
	Cert
	dir    string
	serial int64
}

// New returns a fresh CA, valid from an hour ago for a day.
func New(t testing.TB) *CA {
	t.Helper()
	ca := &CA{dir: t.TempDir(), serial: 1}
	ca.Cert = *ca.issue(t, "ca", &x509.Certificate{
		Subject:               pkix.Name{CommonName: "cipherd test CA", Organization: []string{"cipherd tests"}},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}, nil)
	return ca
}

// Server issues a server certificate for 127.0.0.1 and localhost.
func (ca *CA) Server(t testing.TB) *Cert {
	t.Helper()
	return ca.issue(t, "server", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost", Organization: []string{"cipherd tests"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:    []string{"localhost"},
	}, &ca.Cert)
}

// Client issues a client certificate for cn.
func (ca *CA) Client(t testing.TB, cn string) *Cert {
	t.Helper()
	return ca.issue(t, "client-"+cn, clientTemplate(cn), &ca.Cert)
}

// SelfSigned returns a client certificate for cn that no CA signed, whose
// files are in ca's directory.
func (ca *CA) SelfSigned(t testing.TB, cn string) *Cert {
	t.Helper()
	return ca.issue(t, "self-"+cn, clientTemplate(cn), nil)
}

func clientTemplate(cn string) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: []string{"cipherd tests"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
}

// issue signs tmpl with parent's key (itself when parent is nil) and writes
// name.pem and name.key.
func (ca *CA) issue(t testing.TB, name string, tmpl *x509.Certificate, parent *Cert) *Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.serial++
	tmpl.SerialNumber = big.NewInt(ca.serial)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	issuer, signer := tmpl, key
	if parent != nil {
		issuer, signer = parent.Leaf, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cert{Leaf: leaf, key: key, CertFile: filepath.Join(ca.dir, name+".pem"), KeyFile: filepath.Join(ca.dir, name+".key")}
	if err := os.WriteFile(c.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}
