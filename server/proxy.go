package server

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// Client certificates forwarded by trusted proxies.

// forwardedIdentity returns the identity of the client certificate that a
// trusted proxy forwarded. The proxy verified it; cipherd only parses it.
func (s *Server) forwardedIdentity(c *fiber.Ctx) (*identity, error) {
	// identifyRequest has refused a request with several lines of it: a
	// proxy that adds its line after the client's would otherwise let the
	// client's be read.
	cert, err := forwardedCert(string(c.Context().Request.Header.Peek(headerForwardedCert)))
	if err != nil {
		return nil, err
	}
	id := s.auth().certs[sha256.Sum256(cert.RawSubjectPublicKeyInfo)]
	if id == nil {
		return nil, errors.New("unknown certificate key")
	}
	return id, nil
}

// headerForwardedCert carries the client certificate that a trusted proxy
// terminated TLS for.
const headerForwardedCert = "X-Forwarded-Client-Cert"

// forwardedCert parses the X-Forwarded-Client-Cert header of a trusted proxy.
// Accepted forms:
//
//   - Envoy's XFCC: one element of ;-separated key=value pairs (values may be
//     double-quoted) with the leaf certificate in Cert, as percent-encoded PEM:
//     By=spiffe://lb;Hash=…;Cert="-----BEGIN%20CERTIFICATE-----%0AMII…";Subject="CN=app"
//   - the certificate alone, as percent-encoded PEM (nginx's
//     $ssl_client_escaped_cert);
//   - base64 DER, alone or as the Cert value (HAProxy's %[ssl_c_der,base64]).
//
// Percent-decoding follows RFC 3986, so "+" is a literal plus, as in base64;
// "-----BEGIN+CERTIFICATE-----" from form encoders is tolerated. A header with
// several comma-separated elements, or several header lines, is refused: the
// proxy in front of cipherd must replace any header the client sent, not
// append to it (Envoy: forward_client_cert_details SANITIZE_SET; HAProxy:
// http-request set-header, not add-header).
func forwardedCert(v string) (*x509.Certificate, error) {
	const maxLen = 32 << 10
	v = strings.TrimSpace(v)
	if len(v) > maxLen {
		return nil, errors.New("header too long")
	}
	if strings.HasPrefix(v, "-----BEGIN") {
		return decodeForwardedCert(v)
	}
	elems := splitUnquoted(v, ',')
	if len(elems) != 1 {
		return nil, errors.New("several elements; the proxy must replace the header, not append to it")
	}
	pairs := splitUnquoted(elems[0], ';')
	for _, kv := range pairs {
		k, val, ok := strings.Cut(kv, "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "Cert") {
			return decodeForwardedCert(unquote(strings.TrimSpace(val)))
		}
	}
	if len(pairs) == 1 {
		return decodeForwardedCert(v)
	}
	return nil, errors.New("no Cert field")
}

func decodeForwardedCert(v string) (*x509.Certificate, error) {
	s, err := url.PathUnescape(v)
	if err != nil {
		return nil, errors.New("bad percent-encoding")
	}
	var der []byte
	if strings.Contains(s, "-----BEGIN") {
		s = strings.ReplaceAll(s, "-----BEGIN+", "-----BEGIN ")
		s = strings.ReplaceAll(s, "-----END+", "-----END ")
		rest := []byte(s)
		for der == nil {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				return nil, errors.New("no PEM CERTIFICATE block")
			}
			if b.Type == "CERTIFICATE" {
				der = b.Bytes
			}
		}
	} else if der, err = base64.StdEncoding.DecodeString(s); err != nil {
		return nil, errors.New("neither PEM nor base64 DER")
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, errors.New("not an X.509 certificate")
	}
	return cert, nil
}

// splitUnquoted splits s at every sep outside double quotes (in which a
// backslash escapes the next byte).
func splitUnquoted(s string, sep byte) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case quoted && s[i] == '\\':
			i++
		case s[i] == '"':
			quoted = !quoted
		case !quoted && s[i] == sep:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// unquote removes the double quotes around s and its backslash escapes.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	s = s[1 : len(s)-1]
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
