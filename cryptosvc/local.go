package cryptosvc

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"

	"github.com/cipherd/cipherd/kernels"
)

// Local sealing and opening let a client seal and open messages in the
// sealed format itself, with key material the service hands out for that
// purpose, and with the same kernels; the service keeps the key versions.
//
// To seal, the service hands out a SealingKey: a fresh data key and the
// envelope-mode header that carries it wrapped under the key's latest
// version. Every message sealed with it is an ordinary envelope-mode
// message, header and all: it opens on the service, with any decoder of
// the format, and rewraps by its header. Each message draws its own salt,
// so its body key differs from every other message's under the same data
// key (docs/FORMAT.md, Local sealing).
//
// To open, the client sends the service the start of a message (header,
// salt and commitment) and its context, and gets that message's
// MessageKey: the body's AEAD key and base nonce. It opens that message's
// chunks and no other message's, since every other message has another
// salt; it is neither the data key nor anything of the key version.

// SealingKey is the key material of local sealing: a data key and the
// header of every message sealed with it.
type SealingKey struct {
	Header  []byte // an envelope-mode header whose wrapped data key is DataKey
	DataKey []byte
	Info    Info
}

// NewSealingKey returns a fresh data key and its envelope header under the
// latest version of key name, for a client to seal messages with
// (NewLocalSealer).
func (s *Service) NewSealingKey(ctx context.Context, name string) (SealingKey, error) {
	h, im, vk, err := s.sealTarget(ctx, name)
	if err != nil {
		return SealingKey{}, err
	}
	key := make([]byte, h.AEAD.KeySize())
	if _, err := io.ReadFull(s.rand, key); err != nil {
		return SealingKey{}, fmt.Errorf("cryptosvc: reading randomness: %w", err)
	}
	if err := wrapDataKey(s.rand, im, &h, vk, key); err != nil {
		clear(key)
		return SealingKey{}, err
	}
	hdr, err := h.AppendBinary(nil)
	if err != nil {
		clear(key)
		return SealingKey{}, err
	}
	vk.use.localKeys.Add(1)
	return SealingKey{Header: hdr, DataKey: key, Info: infoOf(&h)}, nil
}

// MessageKey is the key of one message's body: the AEAD key and base nonce
// derived for its salt and context. It opens the chunks of the message
// whose start it was derived for, and of no other.
type MessageKey struct {
	Start []byte // the message's header, salt and commitment
	Key   []byte
	Nonce [chunkNonceSize]byte
	Info  Info
}

// MessageKey returns the key of the body of the message that begins with
// start (its header, salt and commitment: StreamStart bytes of a stream,
// the same of a one-shot message), bound to context. It checks what Open
// checks before any chunk: the key and version, and the commitment, so a
// wrong context fails here with ErrAuthFailed.
func (s *Service) MessageKey(ctx context.Context, name string, start, context []byte) (MessageKey, error) {
	h, n, err := ParseHeader(start)
	if err != nil {
		return MessageKey{}, err
	}
	switch {
	case len(start) < n+chunkedPrefix:
		return MessageKey{}, ErrTruncated
	case len(start) > n+chunkedPrefix:
		return MessageKey{}, fmt.Errorf("%w: a message's start is its header, salt and commitment, and no more", ErrMalformed)
	}
	im, vk, err := s.openTarget(ctx, name, &h)
	if err != nil {
		return MessageKey{}, err
	}
	input, err := bodyKey(im, &h, vk)
	if err != nil {
		return MessageKey{}, err
	}
	ks := h.AEAD.KeySize()
	var out [32 + chunkNonceSize + commitmentSize]byte
	defer clear(out[:])
	salt := start[n : n+saltSize]
	input.expand(out[:ks+chunkNonceSize+commitmentSize], chunkedInfoPrefix, ianaNames[aeadID(h.AEAD)], zeroByte, salt, context)
	if err := checkCommitment(start[n+saltSize:], (*[commitmentSize]byte)(out[ks+chunkNonceSize:])); err != nil {
		return MessageKey{}, err
	}
	mk := MessageKey{Start: bytes.Clone(start), Key: bytes.Clone(out[:ks]), Info: infoOf(&h)}
	copy(mk.Nonce[:], out[ks:])
	vk.use.opened.Add(1)
	return mk, nil
}

// LocalImplementation returns the implementation local sealing and opening
// use for c: the first of kernels.Available (the registry lists the fastest
// first), after the sealed format's known-answer tests.
func LocalImplementation(c kernels.Cipher) (*kernels.Implementation, error) {
	if aeadID(c) == 0 {
		return nil, fmt.Errorf("%w: %s is not a sealed-format AEAD", ErrUnsupported, c)
	}
	av := kernels.Available(c)
	if len(av) == 0 {
		return nil, fmt.Errorf("%w: no usable implementation of %s on this host", ErrUnsupported, c)
	}
	if err := selfTestOnce(av[0]); err != nil {
		return nil, err
	}
	return av[0], nil
}

// LocalSealer seals messages with a SealingKey, without the service. It is
// safe for concurrent use.
type LocalSealer struct {
	header []byte
	input  prk
	im     *kernels.Implementation
	info   Info
	rand   io.Reader
	ahead  keysAhead
}

// NewLocalSealer returns a sealer of messages under sk. It keeps a copy of
// the data key; the caller may clear sk.DataKey.
func NewLocalSealer(sk SealingKey) (*LocalSealer, error) {
	h, n, err := ParseHeader(sk.Header)
	switch {
	case err != nil:
		return nil, err
	case n != len(sk.Header) || h.Mode != ModeEnvelope:
		return nil, fmt.Errorf("%w: a sealing key's header is one envelope-mode header", ErrMalformed)
	case len(sk.DataKey) != h.AEAD.KeySize():
		return nil, fmt.Errorf("%w: a data key of %d bytes for %s", ErrInvalidConfig, len(sk.DataKey), h.AEAD)
	}
	im, err := LocalImplementation(h.AEAD)
	if err != nil {
		return nil, err
	}
	// A pooled PRK: the data key's keyed HMAC state is kept, so that a
	// message's key derivation hashes only its own info
	// (BenchmarkLocalSeal).
	return &LocalSealer{header: bytes.Clone(sk.Header), input: newPRKAhead(sk.DataKey), im: im, info: infoOf(&h), rand: rand.Reader}, nil
}

// Info describes the messages the sealer makes.
func (l *LocalSealer) Info() Info { return l.info }

// SealedLen returns the length of the message sealing n bytes makes.
func (l *LocalSealer) SealedLen(n int64) int64 {
	return int64(len(l.header)+chunkedPrefix) + chunkedLen(n)
}

// Seal appends to dst the message sealing plaintext with context: the
// sealer's header, a fresh salt and its commitment, and the chunks.
func (l *LocalSealer) Seal(dst, plaintext, context []byte) ([]byte, error) {
	if int64(len(plaintext)) >= maxPlaintext {
		return nil, ErrTooLarge
	}
	out := append(dst, l.header...)
	keys, out, err := startBodyAhead(out, &l.ahead, l.rand, l.im, l.input, context)
	if err != nil {
		return nil, err
	}
	out = keys.sealChunks(out, plaintext)
	keys.release()
	return out, nil
}

// EncryptWriter returns a writer that seals what is written to it into a
// message written to w, as Service.EncryptWriter does. The message's start
// is written before it returns; Close completes the message.
func (l *LocalSealer) EncryptWriter(w io.Writer, context []byte) (*EncryptWriter, error) {
	start := append(make([]byte, 0, len(l.header)+chunkedPrefix), l.header...)
	keys, start, err := startBody(start, l.rand, l.im, l.input, context)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(start); err != nil {
		return nil, err
	}
	return newEncryptWriter(w, keys, l.info), nil
}

// LocalOpener opens one message with its MessageKey, without the service.
// It is safe for concurrent use.
type LocalOpener struct {
	mk MessageKey
	im *kernels.Implementation
}

// errOtherMessage: the input does not begin with the start the message key
// was made for.
var errOtherMessage = fmt.Errorf("%w: the message does not begin with the start its message key was made for", ErrAuthFailed)

// NewLocalOpener returns an opener of the message mk was made for.
func NewLocalOpener(mk MessageKey) (*LocalOpener, error) {
	h, n, err := ParseHeader(mk.Start)
	switch {
	case err != nil:
		return nil, err
	case n+chunkedPrefix != len(mk.Start) || len(mk.Key) != h.AEAD.KeySize():
		return nil, fmt.Errorf("%w: a message key is its start and a key of the AEAD's size", ErrMalformed)
	}
	im, err := LocalImplementation(h.AEAD)
	if err != nil {
		return nil, err
	}
	return &LocalOpener{mk: mk, im: im}, nil
}

// Info describes the message.
func (o *LocalOpener) Info() Info { return o.mk.Info }

// StartLen returns the length of the message's start.
func (o *LocalOpener) StartLen() int64 { return int64(len(o.mk.Start)) }

// keys returns fresh key state of the message's body.
func (o *LocalOpener) keys() (*chunkedKeys, error) {
	k := newChunkedKeys(o.im)
	if err := k.setKey(o.im, o.mk.Key); err != nil {
		return nil, err
	}
	k.nonce = o.mk.Nonce
	return k, nil
}

// Open returns the plaintext of ciphertext, the whole message.
func (o *LocalOpener) Open(ciphertext []byte) ([]byte, error) {
	if !bytes.HasPrefix(ciphertext, o.mk.Start) {
		return nil, errOtherMessage
	}
	keys, err := o.keys()
	if err != nil {
		return nil, err
	}
	pt, err := keys.openChunks(nil, ciphertext[len(o.mk.Start):])
	keys.release()
	return pt, err
}

// readStart reads the message's start from r and checks it is the one the
// message key was made for.
func (o *LocalOpener) readStart(read func([]byte) (int, error)) error {
	got := make([]byte, len(o.mk.Start))
	n, err := read(got)
	switch {
	case n == len(got) && bytes.Equal(got, o.mk.Start):
		return nil
	case n == len(got) || err == nil:
		return errOtherMessage
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return ErrTruncated
	}
	return err
}

// DecryptReader returns a reader of the plaintext of the message read from
// r, whole, with DecryptReader's guarantees.
func (o *LocalOpener) DecryptReader(r io.Reader) (*DecryptReader, error) {
	if err := o.readStart(func(p []byte) (int, error) { return io.ReadFull(r, p) }); err != nil {
		return nil, err
	}
	keys, err := o.keys()
	if err != nil {
		return nil, err
	}
	return newDecryptReader(r, keys, o.mk.Info, int64(len(o.mk.Start))), nil
}

// ReaderAt returns random access to the plaintext of the message of size
// bytes held in r, as Service.DecryptReaderAt does.
func (o *LocalOpener) ReaderAt(r io.ReaderAt, size int64) (*ReaderAt, error) {
	if err := o.readStart(func(p []byte) (int, error) { return r.ReadAt(p, 0) }); err != nil {
		return nil, err
	}
	keys, err := o.keys()
	if err != nil {
		return nil, err
	}
	return newReaderAt(r, int64(len(o.mk.Start)), size, keys, o.mk.Info)
}

// DecryptRange reads the range rg from r, which holds the message's start
// and the chunks RangeSpan names, as Service.DecryptRange does.
func (o *LocalOpener) DecryptRange(r io.Reader, size int64, rg Range) (*RangeReader, error) {
	if !rg.valid() || rg.Off >= maxPlaintext {
		return nil, ErrRangeNotSatisfiable
	}
	start := int64(len(o.mk.Start))
	if err := o.readStart(func(p []byte) (int, error) { return io.ReadFull(r, p) }); err != nil {
		return nil, err
	}
	keys, err := o.keys()
	if err != nil {
		return nil, err
	}
	return newRangeReader(r, keys, o.mk.Info, start, size, rg)
}
