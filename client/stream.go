package client

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"

	"github.com/cipherd/cipherd/api"
)

// StreamInfo describes a completed stream.
type StreamInfo struct {
	// KeyVersion and AEAD are the key version and cipher of the sealed
	// stream, as the service reported them.
	KeyVersion uint32
	AEAD       string
	// Written is the number of bytes written to dst.
	Written int64
}

// EncryptStream seals everything src yields under key, bound to context
// (may be nil), and writes the sealed stream to dst. The request body and
// the response are both streamed (full duplex HTTP/1.1): memory stays
// constant whatever the size. src is read until io.EOF and never closed.
//
// When src knows its length (a regular *os.File, or a reader with a
// Len() int method: bytes.Reader, bytes.Buffer, strings.Reader), the upload
// carries it as its Content-Length and the service answers with the exact
// length of the result, written in large pieces; otherwise both are
// chunked and the answer follows the input as it comes. Of a source of
// known length, no more than that length is sent, and on Linux the upload
// keeps within a window (1 MiB on loopback and in a data centre) of the
// answer, so that the service reads it while it is in cache.
//
// When it returns an error, what was written to dst is not a complete
// ciphertext. After an error the transport may still be finishing a read
// from src that was in progress.
func (c *Client) EncryptStream(ctx context.Context, key string, dst io.Writer, src io.Reader, context []byte) (StreamInfo, error) {
	return c.stream(ctx, api.RouteEncrypt, key, "", dst, src, context, false)
}

// DecryptStream opens a sealed stream read from src and writes the plaintext
// to dst as it is authenticated, chunk by chunk. It returns nil only when the
// service sent the whole answer: all of its Content-Length, or, chunked,
// ended with the trailer Cipherd-Status: ok; the service sends the last
// bytes, or the trailer, only after the last chunk authenticated and the
// stream proved complete. A
// cut or tampered stream returns an error wrapping ErrIncompleteStream (or an
// *Error when the service refused it before sending anything), even when the
// body read ended cleanly; the output must then be discarded. A connection
// that fails during the upload without an answer also wraps
// ErrIncompleteStream; a service that cannot be reached at all is the
// transport's error.
func (c *Client) DecryptStream(ctx context.Context, key string, dst io.Writer, src io.Reader, context []byte) (StreamInfo, error) {
	return c.stream(ctx, api.RouteDecrypt, key, "", dst, src, context, true)
}

// RewrapStream rewrites a sealed stream's header for the latest version of
// key and passes the body through unchanged.
func (c *Client) RewrapStream(ctx context.Context, key string, dst io.Writer, src io.Reader, context []byte) (StreamInfo, error) {
	return c.stream(ctx, api.RouteRewrap, key, "", dst, src, context, false)
}

// stream posts src to the route for key, with the query string query when
// it is not empty, and writes the answer to dst.
func (c *Client) stream(ctx context.Context, route, key, query string, dst io.Writer, src io.Reader, aad []byte, trailer bool) (StreamInfo, error) {
	var info StreamInfo
	if err := checkKey(key); err != nil {
		return info, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // an early return stops the upload
	in := &sourceReader{r: src, pace: newPacer(), done: ctx.Done()}
	defer in.pace.stop()
	in.watch.pace = in.pace
	ctx = in.watch.trace(ctx)
	u := c.url(route, key)
	if query != "" {
		u += "?" + query
	}
	req, err := c.newRequest(ctx, http.MethodPost, u, in, api.ContentTypeStream)
	if err != nil {
		return info, err
	}
	if n := sourceLen(src); n > 0 {
		req.ContentLength = n
	}
	if aad != nil {
		req.Header.Set(api.HeaderContext, base64.StdEncoding.EncodeToString(aad))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if err := in.failed(); err != nil {
			return info, fmt.Errorf("cipherd client: reading the input: %w", err)
		}
		if werr := in.watch.refused(); werr != nil && ctx.Err() == nil {
			err = fmt.Errorf("cipherd client: the service closed the connection during the upload without an answer: %w", werr)
		}
		if trailer && in.watch.connected() && ctx.Err() == nil {
			// The service saw some of the ciphertext and closed without an
			// answer (a first chunk that failed, with a transport that lost
			// the answer): nothing was written to dst, and the caller learns
			// it in the type DecryptStream promises.
			return info, fmt.Errorf("%w: %w", ErrIncompleteStream, err)
		}
		return info, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return info, responseError(resp)
	}
	info.AEAD = resp.Header.Get(api.HeaderAEAD)
	if v, err := strconv.ParseUint(resp.Header.Get(api.HeaderKeyVersion), 10, 32); err == nil {
		info.KeyVersion = uint32(v)
	}
	rtt, ok := in.watch.minRTT()
	in.pace.arm(req.ContentLength, resp.ContentLength, rtt, ok)
	out := &sinkWriter{w: dst, pace: in.pace}
	buf := copyBufs.Get().(*[ioBufferSize]byte)
	info.Written, err = io.CopyBuffer(out, resp.Body, buf[:])
	copyBufs.Put(buf)
	switch {
	case out.err != nil:
		return info, fmt.Errorf("cipherd client: writing the output: %w", out.err)
	case in.failed() != nil:
		return info, fmt.Errorf("cipherd client: reading the input: %w", in.failed())
	case err != nil && trailer:
		return info, fmt.Errorf("%w: %v", ErrIncompleteStream, err)
	case err != nil:
		return info, fmt.Errorf("cipherd client: the stream was cut: %w", err)
	case trailer && !(req.ContentLength > 0 && resp.ContentLength >= 0) && resp.Trailer.Get(api.TrailerStatus) != "ok":
		// The service answers an upload of unknown length chunked, and
		// its trailer says the stream proved complete. To an upload of
		// known length it answers with the exact length, complete when
		// all of it came (a short answer is the transport's error,
		// above).
		return info, ErrIncompleteStream
	}
	return info, nil
}

// copyBufs hold the answer on its way to dst: a write to dst per 256 KiB
// rather than io.Copy's 32 KiB (the clients' rounds of scripts/loadbench.sh).
var copyBufs = sync.Pool{New: func() any { return new([ioBufferSize]byte) }}

// sourceLen returns how many bytes src has left when it knows, else -1.
func sourceLen(src io.Reader) int64 {
	switch s := src.(type) {
	case interface{ Len() int }:
		return int64(s.Len())
	case *os.File:
		fi, err := s.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return -1
		}
		off, err := s.Seek(0, io.SeekCurrent)
		if err != nil || off > fi.Size() {
			return -1
		}
		return fi.Size() - off
	}
	return -1
}

// sourceReader is the request body: it remembers src's error, and it is not
// an io.Closer, so the transport never closes the caller's reader. It ends
// once the service has refused the rest of the upload, so that the
// transport reads the answer (see earlyConn) instead of reading src to its
// end for nothing. The transport reads it in a goroutine of its own.
type sourceReader struct {
	r     io.Reader
	pace  *pacer
	done  <-chan struct{} // the request's context's
	watch connWatch
	mu    sync.Mutex
	err   error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	if s.watch.refused() != nil {
		return 0, io.EOF
	}
	s.pace.wait(s.done)
	n, err := s.r.Read(p)
	s.pace.read(n)
	if err != nil && !errors.Is(err, io.EOF) {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
	}
	return n, err
}

// WriteTo copies the source to w as copyPieces does: the transport copies
// a chunked upload with io.Copy, which would otherwise make a chunk, and a
// system call, of every 32 KiB. (An upload of known length goes through
// earlyConn.ReadFrom.)
func (s *sourceReader) WriteTo(w io.Writer) (int64, error) {
	return copyPieces(w.Write, s.Read)
}

func (s *sourceReader) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// sinkWriter remembers dst's error, to tell it from the network's, and
// counts what it writes for the pacer when it has one.
type sinkWriter struct {
	w    io.Writer
	pace *pacer
	err  error
}

func (s *sinkWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if s.pace != nil {
		s.pace.answer(n)
	}
	if err != nil {
		s.err = err
	}
	return n, err
}
