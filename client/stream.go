package client

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
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
// When it returns an error, what was written to dst is not a complete
// ciphertext. After an error the transport may still be finishing a read
// from src that was in progress.
func (c *Client) EncryptStream(ctx context.Context, key string, dst io.Writer, src io.Reader, context []byte) (StreamInfo, error) {
	return c.stream(ctx, api.RouteEncrypt, key, dst, src, context, false)
}

// DecryptStream opens a sealed stream read from src and writes the plaintext
// to dst as it is authenticated, chunk by chunk. It returns nil only when the
// service ended the response with the trailer Cipherd-Status: ok, which it
// sends after the last chunk authenticated and the stream proved complete. A
// cut or tampered stream returns an error wrapping ErrIncompleteStream (or an
// *Error when the service refused it before sending anything), even when the
// body read ended cleanly; the output must then be discarded.
func (c *Client) DecryptStream(ctx context.Context, key string, dst io.Writer, src io.Reader, context []byte) (StreamInfo, error) {
	return c.stream(ctx, api.RouteDecrypt, key, dst, src, context, true)
}

// RewrapStream rewrites a sealed stream's header for the latest version of
// key and passes the body through unchanged.
func (c *Client) RewrapStream(ctx context.Context, key string, dst io.Writer, src io.Reader, context []byte) (StreamInfo, error) {
	return c.stream(ctx, api.RouteRewrap, key, dst, src, context, false)
}

func (c *Client) stream(ctx context.Context, route, key string, dst io.Writer, src io.Reader, aad []byte, trailer bool) (StreamInfo, error) {
	var info StreamInfo
	if err := checkKey(key); err != nil {
		return info, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // an early return stops the upload
	in := &sourceReader{r: src}
	req, err := c.newRequest(ctx, http.MethodPost, c.url(route, key), in, api.ContentTypeStream)
	if err != nil {
		return info, err
	}
	if aad != nil {
		req.Header.Set(api.HeaderContext, base64.StdEncoding.EncodeToString(aad))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if err := in.failed(); err != nil {
			return info, fmt.Errorf("cipherd client: reading the input: %w", err)
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
	out := &sinkWriter{w: dst}
	info.Written, err = io.Copy(out, resp.Body)
	switch {
	case out.err != nil:
		return info, fmt.Errorf("cipherd client: writing the output: %w", out.err)
	case in.failed() != nil:
		return info, fmt.Errorf("cipherd client: reading the input: %w", in.failed())
	case err != nil && trailer:
		return info, fmt.Errorf("%w: %v", ErrIncompleteStream, err)
	case err != nil:
		return info, fmt.Errorf("cipherd client: the stream was cut: %w", err)
	case trailer && resp.Trailer.Get(api.TrailerStatus) != "ok":
		return info, ErrIncompleteStream
	}
	return info, nil
}

// sourceReader is the request body: it remembers src's error, and it is not
// an io.Closer, so the transport never closes the caller's reader.
// The transport reads it in a goroutine of its own.
type sourceReader struct {
	r   io.Reader
	mu  sync.Mutex
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
	}
	return n, err
}

func (s *sourceReader) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// sinkWriter remembers dst's error, to tell it from the network's.
type sinkWriter struct {
	w   io.Writer
	err error
}

func (s *sinkWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil {
		s.err = err
	}
	return n, err
}
