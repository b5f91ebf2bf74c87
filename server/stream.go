package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// Streaming routes read the request body as it arrives and hand fasthttp a
// reader as the response body, so that a few chunks at a time are in memory
// whatever the size. When the upload has a Content-Length, the answer has
// one too, exact: the sealed stream's length is a function of the
// plaintext's (docs/FORMAT.md), and the reverse. Without one, fasthttp
// writes the answer with chunked transfer encoding, and a successful decrypt
// ends with the trailer Cipherd-Status: ok. When the reader fails within
// the answer's first piece, which startStream reads before the answer
// starts, the request gets a JSON error. When it fails later, fasthttp stops
// short of the announced length or without the terminating chunk and closes
// the connection, so no client can take a cut or forged stream for a
// complete one.

// streamContext decodes the Cipherd-Context header. Two lines of it are
// refused rather than one chosen: a proxy that adds its line after the
// client's must not have the client's read.
func streamContext(c *fiber.Ctx) ([]byte, error) {
	all := c.Request().Header.PeekAll(api.HeaderContext)
	switch {
	case len(all) == 0:
		return nil, nil
	case len(all) > 1:
		return nil, apiError(api.CodeBadRequest, "send one "+api.HeaderContext+" header line")
	case len(all[0]) == 0:
		return nil, nil
	}
	var scratch []byte
	b, ok := decodeStrictBase64(all[0], &scratch)
	if !ok {
		return nil, apiError(api.CodeBadRequest, api.HeaderContext+" must be standard base64 (RFC 4648 §4, no line breaks)")
	}
	return b, nil
}

// withStream runs a streaming handler within the caller's limit of
// concurrent streams: handler gets the function that frees the place,
// which it calls when its response ends (or hands to what ends it).
func (s *Server) withStream(c *fiber.Ctx, handler func(release func()) error) error {
	release := s.streams.acquire(callerName(c))
	if release == nil {
		c.Set(fiber.HeaderRetryAfter, "1")
		return apiError(api.CodeTooManyStreams, fmt.Sprintf("this identity has %d streams in flight, its limit", s.cfg.MaxStreamsPerIdentity))
	}
	if err := handler(release); err != nil {
		release()
		return err
	}
	if !c.Response().IsBodyStream() {
		release()
	}
	return nil
}

// errBodyCut: the request body ended before its Content-Length or inside a
// chunk. Deliberately not io.ErrUnexpectedEOF, which a plaintext reader takes
// for the short final read of a complete body: a cut upload must never be
// sealed as a complete stream.
var errBodyCut = errors.New("server: request body cut short")

// idleReader extends the connection's read deadline before every read, so a
// stream may last any time as long as it keeps moving. It reports a body that
// ends early as errBodyCut and keeps the first read error, so that handlers
// can tell a failed read from a bad ciphertext.
type idleReader struct {
	r    io.Reader
	conn net.Conn
	idle time.Duration
	size int64 // Content-Length; -1 when chunked
	n    int64
	err  error // the first read error other than io.EOF
}

func (r *idleReader) Read(p []byte) (int, error) {
	r.conn.SetReadDeadline(time.Now().Add(r.idle))
	n, err := r.r.Read(p)
	r.n += int64(n)
	if err == io.ErrUnexpectedEOF || err == io.EOF && r.size >= 0 && r.n < r.size {
		err = errBodyCut
	}
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
	}
	return n, err
}

// requestBody returns the streamed request body with the idle deadline.
func (s *Server) requestBody(c *fiber.Ctx) *idleReader {
	var body io.Reader
	size := int64(c.Request().Header.ContentLength())
	if bs := c.Context().RequestBodyStream(); bs != nil {
		body = bs
	} else { // a host app without StreamRequestBody has read the body whole
		b := c.Body()
		body, size = bytes.NewReader(b), int64(len(b))
	}
	return &idleReader{r: body, conn: c.Context().Conn(), idle: s.cfg.StreamIdleTimeout, size: size}
}

// streamAudit is what a stream's audit record says of its operation: the
// key and version, and, as a JSON request's record does, the HMACs of the
// message's salt and of its context (appendMACs).
type streamAudit struct {
	op   Op
	key  string
	info cryptosvc.Info
	// sealed keeps the start of the sealed message, where its salt is: of
	// the answer of an encrypt, of the upload of a decrypt or a rewrap.
	sealed  *sealedStart
	context []byte
}

// sealedStartLen is as much of a sealed message as sealedStart keeps: the
// longest header, 241 bytes (docs/FORMAT.md, Header), and the 24-byte salt
// that follows it.
const sealedStartLen = 241 + 24

// sealedStart passes a sealed message through and keeps its first bytes, for
// the audit record to find the message's salt in (cryptosvc.MessageSalt), as
// the JSON routes find it in the whole message. Only sealed bytes go through
// it, never plaintext.
type sealedStart struct {
	r io.Reader
	b []byte // the first bytes read, up to sealedStartLen
}

func newSealedStart(r io.Reader) *sealedStart {
	return &sealedStart{r: r, b: make([]byte, 0, sealedStartLen)}
}

func (m *sealedStart) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if k := min(n, cap(m.b)-len(m.b)); k > 0 {
		m.b = append(m.b, p[:k]...)
	}
	return n, err
}

// start returns the bytes read so far, up to sealedStartLen; nil for no
// message.
func (m *sealedStart) start() []byte {
	if m == nil {
		return nil
	}
	return m.b
}

// responseStream is the body of a streamed response: it extends the write
// deadline as it goes, counts bytes, records the outcome, and on success sets
// the status trailer.
type responseStream struct {
	s *Server
	// fctx outlives the handler (it lives until the response is written);
	// the fiber.Ctx does not and must not be kept.
	fctx   *fasthttp.RequestCtx
	reqID  string
	caller string
	r      io.Reader
	streamAudit
	n       int64
	trailer bool
	start   time.Time
	done    atomic.Bool
	release func() // frees the caller's stream place
	gather  bool   // the upload has a Content-Length: WriteTo writes in large pieces
	size    int64  // the announced Content-Length; -1 when chunked
	remote  string // the client's address, for the audit record
	// buf holds the answer's first piece, read by startStream, then each
	// piece WriteTo writes; first is what of the first piece is still to
	// go, and firstErr how its read ended (nil or io.EOF).
	buf      *[streamWriteSize]byte
	first    []byte
	firstErr error
}

// uploadLen is the request body's Content-Length, or -1 when it has none
// (chunked).
func uploadLen(c *fiber.Ctx) int64 {
	return max(int64(c.Request().Header.ContentLength()), -1)
}

// startStream answers with r as the response body: of size bytes, or of a
// length unknown (-1), then chunked, with the status trailer when trailer
// is set. a is what the stream's audit record will say; body is the
// request's body, which r reads; lead is how much of the answer r yields
// before it reads any of body.
//
// The answer's first piece (what WriteTo would write first) is read before
// the answer starts. A stream that fails within it, a short one above all,
// gets an ordinary JSON error: none of the answer has left the server, and
// a connection closed before its status line would tell the client nothing.
// A stream that ends well within it is answered as before, whole.
func (s *Server) startStream(c *fiber.Ctx, a streamAudit, r io.Reader, body *idleReader, lead int, size int64, trailer bool, release func()) error {
	trailer = trailer && size < 0
	var ip [64]byte
	rs := &responseStream{s: s, fctx: c.Context(), reqID: requestID(c), caller: callerName(c), r: r, streamAudit: a, start: time.Now(), release: release,
		gather: uploadLen(c) >= 0, size: size, remote: string(appendIP(ip[:0], c.Context().RemoteIP()))}
	s.met.streamStart()
	rs.buf = streamBufs.Get().(*[streamWriteSize]byte)
	n, err := rs.piece(rs.buf[:])
	// The answer's first lead bytes (a sealed stream's start, a new
	// header) come before any of the upload's: read on until some of the
	// upload shows, so that a chunked upload cut or stalled in its first
	// chunk fails here too.
	for err == nil && n <= lead && n < len(rs.buf) {
		var k int
		k, err = rs.read(rs.buf[n:])
		n += k
	}
	if err != nil && err != io.EOF {
		streamBufs.Put(rs.buf)
		rs.finish(err) // a no-op when the read already finished it
		if body != nil && body.err != nil {
			return bodyReadError(c, body.err)
		}
		return err
	}
	// HTTP/1.0 has neither chunked framing nor trailers: an answer of a
	// length not known in advance could not tell its end from a failure.
	// One that ended in its first piece has a length now; past the first
	// piece, such a stream cannot be answered.
	if size < 0 && err == io.EOF && !c.Request().Header.IsHTTP11() {
		size, trailer = int64(n), false
		rs.size = size
	}
	if size < 0 && !c.Request().Header.IsHTTP11() {
		streamBufs.Put(rs.buf)
		err := apiError(api.CodeBadRequest, "the answer's length is not known in advance, and HTTP/1.0 cannot frame it: send the request with HTTP/1.1")
		if rs.gather {
			// An upload with a length, whose answer's length is not known:
			// a decrypt of a length no sealed stream has, which cannot
			// succeed whatever the protocol.
			err = apiError(api.CodeTruncated, "no sealed stream has this length")
		}
		rs.finish(err)
		return err
	}
	rs.first, rs.firstErr = rs.buf[:n], err
	if trailer {
		if err := c.Response().Header.SetTrailer(api.TrailerStatus); err != nil {
			return err
		}
		rs.trailer = true
		if err == io.EOF {
			rs.fctx.Response.Header.Set(api.TrailerStatus, "ok")
		}
	}
	c.Set(fiber.HeaderContentType, api.ContentTypeStream)
	c.Set(api.HeaderKeyVersion, strconv.FormatUint(uint64(a.info.Version), 10))
	c.Set(api.HeaderAEAD, a.info.AEAD.String())
	c.Context().SetBodyStream(rs, int(size))
	return nil
}

// piece reads the next piece of the answer into p: as much as fills it when
// the upload has a Content-Length, else what one read of the source yields.
// When the announced length is read, it checks the source ended there.
func (rs *responseStream) piece(p []byte) (int, error) {
	var n int
	var err error
	if rs.gather {
		n, err = readFull(rs, p)
	} else {
		n, err = rs.read(p)
	}
	if err == nil && rs.size >= 0 && rs.n >= rs.size {
		// The announced length is read: the last piece goes only once
		// the source has ended well, so that no client gets all of the
		// announced bytes of a stream that failed at its end (a final
		// chunk that does not authenticate, after full chunks that
		// did).
		err = rs.ended()
	}
	return n, err
}

func (rs *responseStream) Read(p []byte) (int, error) {
	rs.fctx.Conn().SetWriteDeadline(time.Now().Add(rs.s.cfg.StreamIdleTimeout))
	if rs.first != nil {
		n := copy(p, rs.first)
		if rs.first = rs.first[n:]; len(rs.first) == 0 {
			rs.first = nil
			if rs.firstErr != nil {
				return n, rs.firstErr
			}
		}
		return n, nil
	}
	if rs.firstErr != nil {
		return 0, rs.firstErr
	}
	return rs.read(p)
}

// read is Read without the write deadline.
func (rs *responseStream) read(p []byte) (int, error) {
	n, err := rs.r.Read(p)
	rs.n += int64(n)
	switch {
	case err == io.EOF:
		// The stream's record is written before what is left of the
		// answer goes out; one that cannot be written cuts the answer
		// short.
		if aerr := rs.finish(nil); aerr != nil {
			return 0, aerr
		}
		if rs.trailer {
			rs.fctx.Response.Header.Set(api.TrailerStatus, "ok")
		}
	case err != nil:
		rs.finish(err)
	}
	return n, err
}

// streamWriteSize is how much of a streamed response goes to fasthttp in
// one write: fasthttp writes each as one chunk (or one piece of a body of
// known length) and flushes it, so that pieces of this size, rather than
// the 4 KiB it copies a plain reader in, cost a few system calls per
// 256 KiB instead of one per 4 KiB (scripts/loadbench.sh's streams, against
// a net/http server that copies its request body back).
const streamWriteSize = 256 << 10

var streamBufs = sync.Pool{New: func() any { return new([streamWriteSize]byte) }}

// SupportsBodyWriteTo tells fasthttp to write the response with WriteTo
// (fasthttp.BodyWriterTo): WriteTo reads what Read would, in the same
// order, with the same accounting.
func (rs *responseStream) SupportsBodyWriteTo() bool { return true }

// WriteTo writes the response body to w, within the stream idle timeout
// per write. Of an upload with a Content-Length, the whole of which is on
// its way, it gathers pieces of streamWriteSize before each write. Of a
// chunked upload, which may be a pipe that produces its data slowly, it
// writes what each read of the source yields (a sealed or opened chunk), so
// that the output keeps up with the input.
func (rs *responseStream) WriteTo(w io.Writer) (int64, error) {
	var total int64
	n, err := len(rs.first), rs.firstErr
	rs.first, rs.firstErr = nil, nil
	for {
		if n > 0 {
			rs.fctx.Conn().SetWriteDeadline(time.Now().Add(rs.s.cfg.StreamIdleTimeout))
			k, werr := w.Write(rs.buf[:n])
			total += int64(k)
			if werr != nil {
				rs.finish(werr)
				return total, werr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if n, err = rs.piece(rs.buf[:]); err != nil && err != io.EOF {
			return total, err
		}
	}
}

// ended reads the source once more when the announced length is all read,
// and returns io.EOF when it ends there, or why not.
func (rs *responseStream) ended() error {
	var one [1]byte
	for range 100 {
		n, err := rs.read(one[:])
		if n > 0 {
			err = fmt.Errorf("server: the response stream runs past its %d bytes", rs.size)
			rs.finish(err)
			return err
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// readFull reads into p until it is full or rs ends, as io.ReadFull does,
// but returns io.EOF, not io.ErrUnexpectedEOF, for an end after some bytes.
func readFull(rs *responseStream, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k, err := rs.read(p[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Close is called by fasthttp when the response ends, however it ends.
func (rs *responseStream) Close() error {
	rs.finish(errors.New("stream closed before its end"))
	if rs.buf != nil {
		streamBufs.Put(rs.buf)
		rs.buf = nil
	}
	return nil
}

// finish ends the stream with err (nil: the source ended well): it counts
// it and writes its audit record, and returns the error that record's
// write is to the request (see auditFailed).
func (rs *responseStream) finish(err error) error {
	if rs.done.Swap(true) {
		return nil
	}
	rs.release()
	s := rs.s
	s.met.streamEnd()
	s.met.bytes(string(rs.op), rs.info.AEAD.String(), rs.n)
	if errors.Is(err, cryptosvc.ErrAuthFailed) {
		s.met.decryptFailure()
	}
	outcome := "ok"
	level := zap.InfoLevel
	if err != nil {
		outcome, level = string(toAPIError(err).Code), zap.WarnLevel
		if outcome == string(api.CodeInternal) {
			outcome = "aborted" // the client went away, or an idle timeout
		}
	}
	if ce := s.log.Check(level, "audit"); ce != nil {
		ce.Write(zap.String("request_id", rs.reqID), zap.String("identity", rs.caller),
			zap.String("op", string(rs.op)), zap.String("key", rs.key), zap.Uint32("key_version", rs.info.Version),
			zap.Int64("bytes", rs.n), zap.Bool("stream", true), zap.String("outcome", outcome),
			zap.Duration("duration", time.Since(rs.start)))
	}
	l := startAudit(nil, nil, rs.reqID, rs.caller)
	l.str("remote_ip", rs.remote)
	l.str("op", string(rs.op))
	l.str("key", rs.key)
	l.num("key_version", int64(rs.info.Version))
	l.num("bytes", rs.n)
	// The salt is read at the end: a rewrap's passes after the header, as
	// the stream flows.
	s.appendMACs(&l, cryptosvc.MessageSalt(rs.sealed.start()), rs.context)
	l.b = append(l.b, `,"stream":true`...)
	return s.auditFailed(s.audits.Append(l.end(outcome)))
}

// errStreamTooLong refuses a stream encrypt whose Content-Length is more
// plaintext than a stream holds: checkHeaders before the body, the handler
// where no hook ran.
var errStreamTooLong = apiError(api.CodeTooLarge, fmt.Sprintf("a stream holds at most %d bytes of plaintext", int64(cryptosvc.MaxPlaintextLen)))

func (s *Server) streamEncrypt(c *fiber.Ctx, key string, release func()) error {
	ctx, err := streamContext(c)
	if err != nil {
		return err
	}
	body := s.requestBody(c)
	var er *cryptosvc.EncryptReader
	if uploadLen(c) > cryptosvc.MaxPlaintextLen {
		// Refused before the answer announces a length it could never
		// reach.
		err = errStreamTooLong
	} else {
		er, err = s.svc.EncryptReader(c.UserContext(), key, body, ctx)
	}
	if err != nil {
		s.auditStream(c, OpEncrypt, key, cryptosvc.Info{}, 0, err, ctx, nil)
		return err
	}
	size := int64(-1)
	if n := uploadLen(c); n >= 0 {
		size = er.SealedLen(n)
	}
	sealed := newSealedStart(er)
	return s.startStream(c, streamAudit{op: OpEncrypt, key: key, info: er.Info(), sealed: sealed, context: ctx}, sealed, body, er.StartLen(), size, false, release)
}

func (s *Server) streamDecrypt(c *fiber.Ctx, q *call, release func()) error {
	key := q.key
	ctx, err := streamContext(c)
	if err != nil {
		return err
	}
	rg, ranged := queryRange(c)
	var vb *verifyBuffer
	if c.Query("verify") == "full" {
		if vb, err = s.reserveVerify(c, q.row.verifyFull, release); err != nil {
			return err
		}
		defer func() {
			if vb != nil { // the response did not take it
				vb.Close()
			}
		}()
	}
	body := s.requestBody(c)
	sealed := newSealedStart(body)
	var pr plainReader
	size := int64(-1)
	if ranged {
		var rr *cryptosvc.RangeReader
		if rr, err = s.svc.DecryptRange(c.UserContext(), key, sealed, uploadLen(c), rg, ctx); err == nil {
			pr, size = rr, rr.Len()
		}
	} else {
		var dr *cryptosvc.DecryptReader
		if dr, err = s.svc.DecryptReader(c.UserContext(), key, sealed, ctx); err == nil {
			pr = dr
			if n, ok := dr.PlaintextLen(uploadLen(c)); ok {
				size = n
			}
		}
	}
	if err != nil {
		if body.err != nil {
			err = bodyReadError(c, body.err)
		}
		if errors.Is(err, cryptosvc.ErrAuthFailed) {
			s.met.decryptFailure()
		}
		s.auditStream(c, OpDecrypt, key, cryptosvc.Info{}, 0, err, ctx, sealed.start())
		return err
	}
	a := streamAudit{op: OpDecrypt, key: key, info: pr.Info(), sealed: sealed, context: ctx}
	if vb != nil {
		if err := s.verifyFull(c, q, pr, body, vb, &a); err != nil {
			return err
		}
		vb = nil // the response's body now: closed when it is written
		return nil
	}
	return s.startStream(c, a, pr, body, 0, size, true, release)
}

// plainReader is the plaintext of a streamed decrypt: a whole stream's or
// a range's.
type plainReader interface {
	io.Reader
	Info() cryptosvc.Info
}

// validRange reports whether v is a ?range the route takes.
func validRange(v string) bool {
	_, err := cryptosvc.ParseRange(v)
	return err == nil
}

// queryRange returns the request's ?range, which checkQuery has checked.
func queryRange(c *fiber.Ctx) (cryptosvc.Range, bool) {
	v := c.Context().QueryArgs().Peek("range")
	if v == nil {
		return cryptosvc.Range{}, false
	}
	rg, err := cryptosvc.ParseRange(string(v))
	return rg, err == nil
}

// reserveVerify takes a ?verify=full request's share of the budget, before
// any of its body is read: its Content-Length, or the row's limit when it
// has none. A length no plaintext within the limit could have is refused
// 413 (checkHeaders refuses it before this, unless the app is mounted in a
// host app), and a share the budget cannot cover 503 with Retry-After.
// Closing the buffer gives the share back and calls release.
func (s *Server) reserveVerify(c *fiber.Ctx, limit int64, release func()) (*verifyBuffer, error) {
	size := limit
	if cl := int64(c.Request().Header.ContentLength()); cl >= 0 {
		if cl > cryptosvc.MaxSealedLen(limit) {
			return nil, errVerifyTooLarge(limit)
		}
		size = min(cl, limit)
	}
	vb, ok, err := newVerifyBuffer(s.verifyBudget, size)
	switch {
	case !ok:
		c.Set(fiber.HeaderRetryAfter, "1")
		return nil, apiError(api.CodeVerifyBusy, "the server is buffering as much ?verify=full plaintext as it may; retry after Retry-After seconds, or stream without ?verify=full")
	case err != nil:
		return nil, fmt.Errorf("server: mapping a ?verify=full buffer: %w", err)
	}
	s.verifyReserved.Add(size)
	vb.onClose = func() {
		s.verifyReserved.Add(-size)
		release()
	}
	return vb, nil
}

func errVerifyTooLarge(limit int64) error {
	return apiError(api.CodeTooLarge, fmt.Sprintf("plaintext over %d bytes: stream it without ?verify=full", limit))
}

// verifyFull reads the whole plaintext into vb and answers only once every
// chunk authenticated, with vb as the response's body. Its record, written
// before the answer as a JSON request's is, names the message a names.
func (s *Server) verifyFull(c *fiber.Ctx, q *call, dr plainReader, body *idleReader, vb *verifyBuffer, a *streamAudit) error {
	key := q.key
	fits, err := vb.fill(dr)
	switch {
	case err != nil && body.err != nil:
		err = bodyReadError(c, body.err)
	case err == nil && !fits:
		err = errVerifyTooLarge(q.row.verifyFull)
	}
	s.auditStream(c, OpDecrypt, key, dr.Info(), vb.n, err, a.context, a.sealed.start())
	if err != nil {
		if errors.Is(err, cryptosvc.ErrAuthFailed) {
			s.met.decryptFailure()
		}
		return err
	}
	s.met.bytes(string(OpDecrypt), dr.Info().AEAD.String(), int64(vb.n))
	c.Set(fiber.HeaderContentType, api.ContentTypeStream)
	c.Set(api.HeaderKeyVersion, strconv.FormatUint(uint64(dr.Info().Version), 10))
	c.Set(api.HeaderAEAD, dr.Info().AEAD.String())
	c.Context().SetBodyStream(vb, vb.n)
	return nil
}

// streamRewrap rewrites a stream's header: the response is the new header
// followed by whatever of the body the request carries, streamed through. A
// one-shot message (direct mode) is re-encrypted whole instead, within the
// JSON body limit.
func (s *Server) streamRewrap(c *fiber.Ctx, key string, release func()) error {
	ctx, err := streamContext(c)
	if err != nil {
		return err
	}
	body := s.requestBody(c)
	sealed := newSealedStart(body)
	refused := func(err error) error {
		s.auditStream(c, OpRewrap, key, cryptosvc.Info{}, 0, err, ctx, sealed.start())
		return err
	}
	h, hdr, err := cryptosvc.ReadHeader(sealed)
	if err != nil {
		if body.err != nil {
			err = bodyReadError(c, body.err)
		}
		return refused(err)
	}
	in := hdr
	if h.Mode == cryptosvc.ModeDirect {
		rest, err := io.ReadAll(io.LimitReader(sealed, int64(s.cfg.MaxJSONBody)+1))
		if err != nil {
			return refused(bodyReadError(c, err))
		}
		if len(rest)+len(hdr) > s.cfg.MaxJSONBody {
			return refused(apiError(api.CodeTooLarge, "a one-shot message over the body limit cannot be rewrapped"))
		}
		in = append(hdr, rest...)
	}
	out, info, err := s.svc.Rewrap(c.UserContext(), key, in, ctx)
	if err != nil {
		// The stream's own record (responseStream.finish) is its only
		// one when it starts.
		s.auditStream(c, OpRewrap, key, info, len(in), err, ctx, in)
		return err
	}
	// The record names the salt of the message as it came, as a JSON
	// rewrap's does: a stream's is also that of the answer, whose body is
	// the upload's.
	a := streamAudit{op: OpRewrap, key: key, info: info, sealed: sealed, context: ctx}
	if h.Mode == cryptosvc.ModeDirect {
		return s.startStream(c, a, bytes.NewReader(out), body, len(out), int64(len(out)), false, release)
	}
	size := int64(-1)
	if n := uploadLen(c); n >= 0 {
		size = int64(len(out)) + n - int64(len(hdr))
	}
	return s.startStream(c, a, io.MultiReader(bytes.NewReader(out), sealed), body, len(out), size, false, release)
}
