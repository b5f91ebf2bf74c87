package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/kernels"
)

// Local sealing and opening: the client seals and opens messages in the
// sealed format itself, with the same kernels as the service, and asks the
// service only for key material (docs/API.md, Local sealing and opening).
// What it seals is an ordinary envelope-mode message: it opens through the
// service and rewraps by its header, and what the service sealed opens
// locally.

// LocalLimits bound the use of one sealing key: a LocalSealer seals with it
// for at most MaxAge, MaxMessages messages and MaxBytes of plaintext,
// whichever comes first, and then takes a new one. A zero field takes the
// service's limit; a field above the service's is lowered to it.
type LocalLimits struct {
	MaxAge      time.Duration
	MaxMessages int64
	MaxBytes    int64
}

// LocalSealer seals messages under a key locally, with a sealing key from
// the service that it keeps and reuses within its limits: with the
// service's default limits, one service call per 2^20 messages, 4 GiB or
// 5 minutes. It is safe for concurrent use.
type LocalSealer struct {
	c      *Client
	key    string
	limits LocalLimits
	now    func() time.Time

	mu  sync.Mutex
	cur *sealingKey
}

// sealingKey is a sealing key in use and what it has sealed.
type sealingKey struct {
	l        *cryptosvc.LocalSealer
	expires  time.Time
	messages int64 // left
	bytes    int64 // left
}

// NewLocalSealer returns a sealer of messages under key.
func (c *Client) NewLocalSealer(key string, limits LocalLimits) (*LocalSealer, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if limits.MaxAge < 0 || limits.MaxMessages < 0 || limits.MaxBytes < 0 {
		return nil, errors.New("cipherd client: local sealing limits are positive, or zero for the service's")
	}
	return &LocalSealer{c: c, key: key, limits: limits, now: time.Now}, nil
}

// SealingKey asks the service for a fresh sealing key under key: the data
// key and envelope header a cryptosvc.LocalSealer seals with, and the
// service's limits of its use.
func (c *Client) SealingKey(ctx context.Context, key string) (*api.SealingKeyResponse, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	var res api.SealingKeyResponse
	if err := c.do(ctx, http.MethodPost, c.url(api.RouteSealKey, key), struct{}{}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// take reserves one message of n bytes of plaintext (n < 0: unknown) on a
// sealing key and returns its sealer. A message that does not fit what the
// cached key has left gets a fresh key; one over the limit itself, or of
// unknown length, a key of its own, which is not kept.
func (l *LocalSealer) take(ctx context.Context, n int64) (*cryptosvc.LocalSealer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := l.cur; k != nil && n >= 0 && k.messages > 0 && k.bytes >= n && l.now().Before(k.expires) {
		k.messages--
		k.bytes -= n
		return k.l, nil
	}
	k, err := l.fetch(ctx)
	if err != nil {
		return nil, err
	}
	if n < 0 || n > k.bytes {
		return k.l, nil
	}
	k.messages--
	k.bytes -= n
	l.cur = k
	return k.l, nil
}

// fetch takes a fresh sealing key from the service, under the lower of the
// service's limits and the sealer's.
func (l *LocalSealer) fetch(ctx context.Context) (*sealingKey, error) {
	started := l.now()
	res, err := l.c.SealingKey(ctx, l.key)
	if err != nil {
		return nil, err
	}
	age, err := time.ParseDuration(res.Limits.MaxAge)
	if err != nil || age <= 0 || res.Limits.MaxMessages <= 0 || res.Limits.MaxBytes <= 0 {
		return nil, fmt.Errorf("cipherd client: the service's local sealing limits %+v are not usable", res.Limits)
	}
	lower := func(a, b int64) int64 {
		if b > 0 && b < a {
			return b
		}
		return a
	}
	sl, err := cryptosvc.NewLocalSealer(cryptosvc.SealingKey{Header: res.Header, DataKey: res.DataKey})
	clear(res.DataKey)
	if err != nil {
		return nil, fmt.Errorf("cipherd client: the service's sealing key: %w", err)
	}
	return &sealingKey{l: sl, expires: started.Add(time.Duration(lower(int64(age), int64(l.limits.MaxAge)))),
		messages: lower(res.Limits.MaxMessages, l.limits.MaxMessages), bytes: lower(res.Limits.MaxBytes, l.limits.MaxBytes)}, nil
}

// Seal seals plaintext, bound to context (may be nil), into a one-shot
// message in the sealed format: what Encrypt returns, sealed here.
func (l *LocalSealer) Seal(ctx context.Context, plaintext, context []byte) ([]byte, error) {
	return l.AppendSeal(ctx, nil, plaintext, context)
}

// AppendSeal is Seal appending the message to dst, as cipher.AEAD.Seal
// does: a caller that reuses dst seals with no allocation
// (BenchmarkLocalSealer).
func (l *LocalSealer) AppendSeal(ctx context.Context, dst, plaintext, context []byte) ([]byte, error) {
	sl, err := l.take(ctx, int64(len(plaintext)))
	if err != nil {
		return nil, err
	}
	if dst == nil {
		dst = make([]byte, 0, sl.SealedLen(int64(len(plaintext))))
	}
	return sl.Seal(dst, plaintext, context)
}

// EncryptStream seals everything src yields into a sealed stream written
// to dst, as EncryptStream does through the service. A source of unknown
// length, or longer than what the cached sealing key has left, is sealed
// under a sealing key of its own.
func (l *LocalSealer) EncryptStream(ctx context.Context, dst io.Writer, src io.Reader, context []byte) (StreamInfo, error) {
	// Chunks sealed on every core while the source is read
	// (cryptosvc's BenchmarkLocalSealStream).
	return l.sealTo(ctx, sourceLen(src), dst, func(sl *cryptosvc.LocalSealer, w io.Writer) error {
		_, err := sl.SealStream(w, src, context, 0)
		return err
	})
}

// sealTo takes a sealing key for n bytes (-1: unknown) and runs seal with
// it into dst, counting what is written and telling a failed write of
// dst from a failed read of the input.
func (l *LocalSealer) sealTo(ctx context.Context, n int64, dst io.Writer, seal func(*cryptosvc.LocalSealer, io.Writer) error) (StreamInfo, error) {
	sl, err := l.take(ctx, n)
	if err != nil {
		return StreamInfo{}, err
	}
	info := StreamInfo{KeyVersion: sl.Info().Version, AEAD: sl.Info().AEAD.String()}
	out := &sinkWriter{w: dst}
	cw := &countWriter{w: out}
	err = seal(sl, cw)
	info.Written = cw.n
	if out.err != nil {
		return info, fmt.Errorf("cipherd client: writing the output: %w", out.err)
	}
	if err != nil {
		return info, fmt.Errorf("cipherd client: reading the input: %w", err)
	}
	return info, nil
}

// EncryptFile seals the rest of the regular file f, from its offset to its
// end, as EncryptStream does, and leaves the offset at the end. It maps the
// file into memory and seals it on every core straight from its pages, a
// copy of each byte fewer than reading it (BENCHMARKS.md, Local sealing).
// Anything that cannot be mapped, such as a pipe or an empty file, is read
// as EncryptStream reads it. A file that shrinks while it is sealed fails
// with an error; the output is then not a complete message.
func (l *LocalSealer) EncryptFile(ctx context.Context, dst io.Writer, f *os.File, context []byte) (StreamInfo, error) {
	size := sourceLen(f)
	if size <= 0 {
		return l.EncryptStream(ctx, dst, f, context)
	}
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return l.EncryptStream(ctx, dst, f, context)
	}
	data, unmap, err := mapFile(f, off, size)
	if err != nil {
		return l.EncryptStream(ctx, dst, f, context)
	}
	defer unmap()
	info, err := l.sealTo(ctx, size, dst, func(sl *cryptosvc.LocalSealer, w io.Writer) error {
		_, err := sl.SealBytesDone(w, data, context, 0, releasePages)
		return err
	})
	if err != nil {
		return info, err
	}
	if _, err := f.Seek(off+size, io.SeekStart); err != nil {
		return info, fmt.Errorf("cipherd client: reading the input: %w", err)
	}
	return info, nil
}

// errNoMap is mapFile's error where files cannot be mapped.
var errNoMap = errors.New("cipherd client: cannot map the file")

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// MessageKey asks the service for the key of the body of the message that
// begins with start (its header, salt and commitment), bound to context.
// The key opens that message and no other. Keys are kept in the client's
// message-key cache (WithMessageKeyCache).
func (c *Client) MessageKey(ctx context.Context, key string, start, context []byte) (cryptosvc.MessageKey, error) {
	if err := checkKey(key); err != nil {
		return cryptosvc.MessageKey{}, err
	}
	id := messageKeyID(key, start, context)
	if mk, ok := c.mkCache.get(id); ok {
		return mk, nil
	}
	var res api.MessageKeyResult
	if err := c.do(ctx, http.MethodPost, c.url(api.RouteMessageKey, key), &api.MessageKeyRequest{Start: start, Context: context}, &res); err != nil {
		return cryptosvc.MessageKey{}, err
	}
	aead, err := kernels.ParseCipher(res.AEAD)
	if err != nil || len(res.Nonce) != 12 {
		return cryptosvc.MessageKey{}, fmt.Errorf("cipherd client: the service's message key is malformed (%s, a nonce of %d bytes)", res.AEAD, len(res.Nonce))
	}
	mk := cryptosvc.MessageKey{Start: bytes.Clone(start), Key: res.Key, Info: cryptosvc.Info{Key: key, Version: res.KeyVersion, AEAD: aead}}
	copy(mk.Nonce[:], res.Nonce)
	c.mkCache.put(id, mk)
	return mk, nil
}

// messageKeyID names a message key in the cache: the key name, the
// message's start and the context, hashed, so that the cache holds no
// context value.
func messageKeyID(key string, start, context []byte) [sha256.Size]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s%d:", len(key), key, len(start))
	h.Write(start)
	h.Write(context)
	var id [sha256.Size]byte
	h.Sum(id[:0])
	return id
}

// opener returns a local opener of the message that begins with start.
func (c *Client) opener(ctx context.Context, key string, start, context []byte) (*cryptosvc.LocalOpener, error) {
	mk, err := c.MessageKey(ctx, key, start, context)
	if err != nil {
		return nil, err
	}
	return cryptosvc.NewLocalOpener(mk)
}

// OpenLocal opens a sealed message held in memory (one-shot or a whole
// stream) locally: one small call to the service for its message key,
// none when the key is cached.
func (c *Client) OpenLocal(ctx context.Context, key string, ciphertext, context []byte) ([]byte, error) {
	n, err := cryptosvc.StreamStart(bytes.NewReader(ciphertext), int64(len(ciphertext)))
	if err != nil {
		return nil, localError(err)
	}
	o, err := c.opener(ctx, key, ciphertext[:n], context)
	if err != nil {
		return nil, err
	}
	pt, err := o.Open(ciphertext)
	return pt, localError(err)
}

// DecryptStreamLocal opens a sealed stream read from src locally and
// writes the plaintext to dst as each chunk authenticates. It returns nil
// only when the stream ended with its final chunk; otherwise the output
// must be discarded, as with DecryptStream.
func (c *Client) DecryptStreamLocal(ctx context.Context, key string, dst io.Writer, src io.Reader, context []byte) (StreamInfo, error) {
	var start bytes.Buffer
	if _, _, err := cryptosvc.ReadHeader(io.TeeReader(src, &start)); err != nil {
		return StreamInfo{}, localError(err)
	}
	if _, err := io.CopyN(&start, src, 56); err != nil {
		return StreamInfo{}, localError(cryptosvc.ErrTruncated)
	}
	o, err := c.opener(ctx, key, start.Bytes(), context)
	if err != nil {
		return StreamInfo{}, err
	}
	dr, err := o.DecryptReader(io.MultiReader(bytes.NewReader(start.Bytes()), src))
	if err != nil {
		return StreamInfo{}, localError(err)
	}
	return copyPlaintext(dst, dr, o.Info())
}

// DecryptRangeLocal opens n bytes from offset off (n < 0: to the end) of
// the sealed stream of size bytes in src locally, reading only its start
// and the chunks that cover the range, as DecryptRange does through the
// service.
func (c *Client) DecryptRangeLocal(ctx context.Context, key string, dst io.Writer, src io.ReaderAt, size, off, n int64, context []byte) (StreamInfo, error) {
	if n == 0 {
		return StreamInfo{}, nil
	}
	req, err := newRangeRequest(src, size, off, n)
	if err != nil {
		return StreamInfo{}, err
	}
	head := make([]byte, req.start)
	if _, err := src.ReadAt(head, 0); err != nil {
		return StreamInfo{}, fmt.Errorf("cipherd client: reading the input: %w", err)
	}
	o, err := c.opener(ctx, key, head, context)
	if err != nil {
		return StreamInfo{}, err
	}
	rr, err := o.DecryptRange(req.body, req.body.left, req.rg)
	if err != nil {
		return StreamInfo{}, localError(err)
	}
	return copyPlaintext(dst, rr, o.Info())
}

// copyPlaintext writes what r opens to dst.
func copyPlaintext(dst io.Writer, r io.Reader, info cryptosvc.Info) (StreamInfo, error) {
	si := StreamInfo{KeyVersion: info.Version, AEAD: info.AEAD.String()}
	out := &sinkWriter{w: dst}
	buf := copyBufs.Get().(*[ioBufferSize]byte)
	n, err := io.CopyBuffer(out, r, buf[:])
	copyBufs.Put(buf)
	si.Written = n
	switch {
	case out.err != nil:
		return si, fmt.Errorf("cipherd client: writing the output: %w", out.err)
	case err != nil:
		return si, fmt.Errorf("%w: %w", ErrIncompleteStream, localError(err))
	}
	return si, nil
}

// localError is a failure of local opening in the service's codes, so that
// a caller tells them apart as it does the service's answers.
func localError(err error) error {
	var code api.Code
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cryptosvc.ErrAuthFailed):
		code = api.CodeDecryptFailed
	case errors.Is(err, cryptosvc.ErrTruncated):
		code = api.CodeTruncated
	case errors.Is(err, cryptosvc.ErrMalformed), errors.Is(err, cryptosvc.ErrUnsupported):
		code = api.CodeMalformed
	case errors.Is(err, cryptosvc.ErrRangeNotSatisfiable):
		code = api.CodeRangeNotSatisfiable
	case errors.Is(err, cryptosvc.ErrRangeMismatch):
		code = api.CodeRangeMismatch
	default:
		return fmt.Errorf("cipherd client: reading the input: %w", err)
	}
	return &Error{API: api.Error{Code: code, Message: "opened locally: " + err.Error()}}
}

// messageKeyCache keeps message keys for a while, so that reading a
// message again (another range of the same object) needs no service call.
type messageKeyCache struct {
	mu     sync.Mutex
	maxAge time.Duration
	max    int
	m      map[[sha256.Size]byte]cachedMessageKey
}

type cachedMessageKey struct {
	mk      cryptosvc.MessageKey
	expires time.Time
}

// WithMessageKeyCache keeps up to max message keys for at most maxAge (by
// default 1024 keys for 5 minutes); max 0 keeps none.
func WithMessageKeyCache(maxAge time.Duration, max int) Option {
	return func(c *Client) { c.mkCache = newMessageKeyCache(maxAge, max) }
}

func newMessageKeyCache(maxAge time.Duration, max int) *messageKeyCache {
	return &messageKeyCache{maxAge: maxAge, max: max, m: make(map[[sha256.Size]byte]cachedMessageKey)}
}

func (m *messageKeyCache) get(id [sha256.Size]byte) (cryptosvc.MessageKey, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[id]
	if !ok {
		return cryptosvc.MessageKey{}, false
	}
	if time.Now().After(e.expires) {
		delete(m.m, id)
		return cryptosvc.MessageKey{}, false
	}
	return e.mk, true
}

func (m *messageKeyCache) put(id [sha256.Size]byte, mk cryptosvc.MessageKey) {
	if m.max <= 0 || m.maxAge <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if len(m.m) >= m.max {
		for k, e := range m.m { // expired first, else any one
			if now.After(e.expires) {
				delete(m.m, k)
			}
		}
		for k := range m.m {
			if len(m.m) < m.max {
				break
			}
			delete(m.m, k)
		}
	}
	m.m[id] = cachedMessageKey{mk: mk, expires: now.Add(m.maxAge)}
}
