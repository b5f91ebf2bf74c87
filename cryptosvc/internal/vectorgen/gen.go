package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/kernels"
)

// The layout of a body (c2sp.org/chunked-encryption with a 16-byte tag).
const (
	saltSize       = 24
	commitmentSize = 32
	tagSize        = 16
	bodyPrefix     = saltSize + commitmentSize
	sealedChunk    = cryptosvc.ChunkSize + tagSize
)

const defaultKeyName = "vector-key"

var (
	defaultContext = []byte("cipherd test vector context")
	shortPlaintext = []byte("cipherd test vector plaintext")
	epoch          = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// secret returns the fixed secret of key version v. The vectors' keys use
// versions 1, 2, …; other numbers give unrelated secrets.
func secret(v int) []byte {
	s := sha256.Sum256(fmt.Appendf(nil, "cipherd vectorgen: secret %d", v))
	return s[:]
}

func secrets(n int) [][]byte {
	s := make([][]byte, n)
	for i := range s {
		s[i] = secret(i + 1)
	}
	return s
}

// longPlaintext returns n fixed pseudorandom bytes.
func longPlaintext(n int) []byte {
	p := make([]byte, n)
	rand.NewChaCha8(sha256.Sum256([]byte("cipherd vectorgen: plaintext"))).Read(p)
	return p
}

// gen builds one case. Its randomness is a ChaCha8 stream seeded by the
// case's name, so each case is reproducible on its own.
type gen struct {
	name string
	rnd  io.Reader

	// The key the vector's reader holds.
	keyName string
	secrets [][]byte
	minDec  uint32
}

func newGen(name string) *gen {
	return &gen{
		name:    name,
		rnd:     rand.NewChaCha8(sha256.Sum256([]byte("cipherd vectorgen: rand " + name))),
		keyName: defaultKeyName,
		secrets: secrets(1),
	}
}

// service returns a Service sealing with aead and holding one key.
func (g *gen) service(aead kernels.Cipher, keyName string, secrets [][]byte) *cryptosvc.Service {
	s, err := cryptosvc.New(cryptosvc.Config{
		Keystore: cryptosvc.NewMemStore(),
		AEAD:     aead,
		Rand:     g.rnd,
		Now:      func() time.Time { return epoch },
	})
	must(err)
	var ss []cryptosvc.Secret
	for _, b := range secrets {
		sec, err := cryptosvc.NewSecret(b)
		must(err)
		ss = append(ss, sec)
	}
	_, err = s.ImportKey(context.Background(), keyName, ss, cryptosvc.KeyConfig{})
	must(err)
	return s
}

// seal returns a one-shot (direct mode) message under the latest version.
func (g *gen) seal(aead kernels.Cipher, keyName string, secrets [][]byte, pt, ctx []byte) []byte {
	ct, _, err := g.service(aead, keyName, secrets).Seal(context.Background(), keyName, pt, ctx)
	must(err)
	return ct
}

// stream returns a stream (envelope mode) under the latest version.
func (g *gen) stream(aead kernels.Cipher, keyName string, secrets [][]byte, pt, ctx []byte) []byte {
	var buf bytes.Buffer
	w, err := g.service(aead, keyName, secrets).EncryptWriter(context.Background(), keyName, &buf, ctx)
	must(err)
	_, err = w.Write(pt)
	must(err)
	must(w.Close())
	return buf.Bytes()
}

// Shorthands for the common key: defaultKeyName, version 1.
func (g *gen) seal1(aead kernels.Cipher, pt, ctx []byte) []byte {
	return g.seal(aead, defaultKeyName, secrets(1), pt, ctx)
}

func (g *gen) stream1(aead kernels.Cipher, pt, ctx []byte) []byte {
	return g.stream(aead, defaultKeyName, secrets(1), pt, ctx)
}

func (g *gen) vector(desc string, ct, ctx []byte) Vector {
	v := Vector{
		Name:                 g.name,
		Description:          desc,
		SecretHex:            hex.EncodeToString(g.secrets[0]),
		MinDecryptionVersion: g.minDec,
		KeyName:              g.keyName,
		ContextHex:           hex.EncodeToString(ctx),
		CiphertextHex:        hex.EncodeToString(ct),
	}
	for _, s := range g.secrets[1:] {
		v.MoreSecretsHex = append(v.MoreSecretsHex, hex.EncodeToString(s))
	}
	return v
}

// valid returns a vector that opens to pt, reporting the header's AEAD,
// mode and key version.
func (g *gen) valid(desc string, ct, ctx, pt []byte) Vector {
	v := g.vector(desc, ct, ctx)
	v.Result = "valid"
	if len(pt) <= 256 {
		h := hex.EncodeToString(pt)
		v.PlaintextHex = &h
	} else {
		sum := sha512.Sum512(pt)
		v.PlaintextSHA512 = hex.EncodeToString(sum[:])
	}
	h, _, err := cryptosvc.ParseHeader(ct)
	must(err)
	v.AEAD, v.Mode, v.KeyVersion = h.AEAD.String(), h.Mode.String(), h.KeyVersion
	return v
}

// invalid returns a vector that must fail with the sentinel named errKind.
func (g *gen) invalid(desc string, ct, ctx []byte, errKind string) Vector {
	v := g.vector(desc, ct, ctx)
	v.Result, v.Error = "invalid", errKind
	return v
}

// Byte surgery. None of these modifies its argument.

// headerLen returns the length of ct's header, which must parse.
func headerLen(ct []byte) int {
	_, n, err := cryptosvc.ParseHeader(ct)
	must(err)
	return n
}

// prefixLen returns the length of ct's header up to the wrapped key.
func prefixLen(ct []byte) int {
	h, n, err := cryptosvc.ParseHeader(ct)
	must(err)
	return n - len(h.WrappedKey)
}

// split returns ct's header, body prefix (salt and commitment), and chunks.
func split(ct []byte) (header, prefix []byte, chunks [][]byte) {
	n := headerLen(ct)
	header, prefix, rest := ct[:n], ct[n:n+bodyPrefix], ct[n+bodyPrefix:]
	for len(rest) > 0 {
		k := min(len(rest), sealedChunk)
		chunks = append(chunks, rest[:k])
		rest = rest[k:]
	}
	return header, prefix, chunks
}

func join(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// flip returns b with the low bit of b[i] flipped (i < 0 counts from the end).
func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	if i < 0 {
		i += len(b)
	}
	b[i] ^= 0x01
	return b
}

// set returns b with b[i] = x.
func set(b []byte, i int, x byte) []byte {
	b = bytes.Clone(b)
	b[i] = x
	return b
}

// replace returns b with b[i:j] replaced by r.
func replace(b []byte, i, j int, r []byte) []byte {
	return join(b[:i], r, b[j:])
}

// relabel returns ct with its header decoded, changed by f, and encoded again.
func relabel(ct []byte, f func(*cryptosvc.Header)) []byte {
	h, n, err := cryptosvc.ParseHeader(ct)
	must(err)
	f(&h)
	out, err := h.AppendBinary(nil)
	must(err)
	return append(out, ct[n:]...)
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// counter is the stand-in CSPRNG of the worked examples in docs/FORMAT.md: it
// yields next, next+1, … (mod 256).
type counter struct{ next byte }

func (c *counter) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = c.next
		c.next++
	}
	return len(p), nil
}

// sequence returns the n bytes from, from+1, …
func sequence(from byte, n int) []byte {
	c := counter{from}
	b := make([]byte, n)
	c.Read(b)
	return b
}
