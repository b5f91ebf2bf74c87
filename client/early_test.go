package client_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/client"
	"github.com/cipherd/cipherd/server"
)

// zeros yields n zero bytes and counts what is left. The count is atomic:
// after an error the transport may still be in a Read.
type zeros struct{ left atomic.Int64 }

func newZeros(n int64) *zeros {
	z := &zeros{}
	z.left.Store(n)
	return z
}

func (z *zeros) Read(p []byte) (int, error) {
	left := z.left.Load()
	if left <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), left)]
	clear(p)
	z.left.Add(-int64(len(p)))
	return len(p), nil
}

// The service answers a refused upload (unknown key, bad token, a
// ciphertext that fails at its first chunk) before reading it and closes
// the connection. The client must return that answer, never the write
// error of the rest of the upload: the race between the two is lost often
// enough that a few rounds of each case show it.
func TestClientEarlyAnswerToLargeUpload(t *testing.T) {
	t.Run("http", func(t *testing.T) {
		url, _ := startServer(t)
		testEarlyAnswer(t, url)
	})
	t.Run("https", func(t *testing.T) {
		cert, key, pool := selfSigned(t)
		url, _ := startServerConfig(t, server.Config{TLSCert: cert, TLSKey: key})
		testEarlyAnswer(t, url, client.WithTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	})
}

func testEarlyAnswer(t *testing.T, url string, opts ...client.Option) {
	ctx := context.Background()
	c := newClient(t, url, opts...)
	bad := newClient(t, url, append(opts, client.WithToken("wrong"))...)

	// A real sealed stream whose first chunk is flipped, followed by more
	// than the service will ever read.
	pt := make([]byte, 100_000)
	rand.Read(pt)
	var ct bytes.Buffer
	if _, err := c.EncryptStream(ctx, "default", &ct, bytes.NewReader(pt), nil); err != nil {
		t.Fatal(err)
	}
	tampered := ct.Bytes()[:50_000]
	tampered[8000] ^= 1

	const size = 64 << 20
	big := make([]byte, 3<<20)  // 4 MiB of JSON, within the default limit
	huge := make([]byte, 4<<20) // 5.3 MiB of JSON, over the limit
	for round := range 12 {
		src := newZeros(size)
		_, err := c.EncryptStream(ctx, "missing", io.Discard, src, nil)
		var ce *client.Error
		if !errors.Is(err, client.ErrKeyNotFound) || !errors.As(err, &ce) || ce.Status != 404 || ce.API.RequestID == "" {
			t.Fatalf("round %d: unknown key: %v", round, err)
		}
		if src.left.Load() == 0 {
			t.Fatalf("round %d: unknown key: the whole upload was read", round)
		}

		src = newZeros(size)
		_, err = bad.EncryptStream(ctx, "default", io.Discard, src, nil)
		if !errors.Is(err, client.ErrUnauthenticated) || !errors.As(err, &ce) || ce.Status != 401 {
			t.Fatalf("round %d: bad token: %v", round, err)
		}
		if src.left.Load() == 0 {
			t.Fatalf("round %d: bad token: the whole upload was read", round)
		}

		src = newZeros(size)
		_, err = bad.DecryptStream(ctx, "default", io.Discard, src, nil)
		if !errors.Is(err, client.ErrUnauthenticated) {
			t.Fatalf("round %d: bad token, decrypt: %v", round, err)
		}

		// JSON bodies too: refused before they are read (fewer rounds:
		// each encodes megabytes).
		if round < 4 {
			if _, err := bad.Encrypt(ctx, "default", big, nil); !errors.Is(err, client.ErrUnauthenticated) {
				t.Fatalf("round %d: bad token, %d-byte JSON: %v", round, len(big), err)
			}
			if _, err := c.Encrypt(ctx, "default", huge, nil); !errors.Is(err, client.ErrTooLarge) {
				t.Fatalf("round %d: JSON over the limit: %v", round, err)
			}
		}

		var out bytes.Buffer
		_, err = c.DecryptStream(ctx, "default", &out, io.MultiReader(bytes.NewReader(tampered), newZeros(size)), nil)
		if !errors.Is(err, client.ErrIncompleteStream) && !client.IsCode(err, api.CodeDecryptFailed) {
			t.Fatalf("round %d: tampered first chunk: %v", round, err)
		}
		if out.Len() != 0 {
			t.Fatalf("round %d: tampered first chunk: %d bytes of output", round, out.Len())
		}
		if round == 0 {
			t.Logf("tampered first chunk: %v", err)
		}
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key to PEM files
// and returns their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}
