package client

import (
	"context"
	"errors"
	"io"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// ErrRangeNotSatisfiable: a range that starts at or past the end of the
// plaintext, found by the client from the sealed stream's size or answered
// so by the service.
var ErrRangeNotSatisfiable = sentinel(api.CodeRangeNotSatisfiable)

// DecryptRange opens n bytes of plaintext from offset off (n < 0: to the
// end) of the sealed stream held in src, size bytes long, and writes them
// to dst. It reads and sends only the stream's start (header, salt and
// commitment) and the chunks that cover the range, about n bytes plus one
// chunk of 16 KiB on each side, so a range of an object in storage costs
// its own size whatever the object's. A range that runs past the end of
// the plaintext ends there.
//
// It returns nil only when the service sent all of the range: every chunk
// authenticated, and a range that reaches the end ended with the final
// chunk. Otherwise what was written to dst must be discarded, as with
// DecryptStream.
func (c *Client) DecryptRange(ctx context.Context, key string, dst io.Writer, src io.ReaderAt, size, off, n int64, context []byte) (StreamInfo, error) {
	if n == 0 {
		return StreamInfo{}, nil
	}
	req, err := newRangeRequest(src, size, off, n)
	if err != nil {
		return StreamInfo{}, err
	}
	return c.stream(ctx, api.RouteDecrypt, key, "range="+req.rg.String(), dst, req.body, context, true)
}

// RangeBody returns the request body of a range decrypt of n bytes from
// off (n < 0: to the end) of the sealed stream of size bytes in src, and
// the value of its ?range parameter: for a caller who sends the request
// another way (docs/API.md, Ranges). The body has a Len method.
func RangeBody(src io.ReaderAt, size, off, n int64) (body io.Reader, rg string, err error) {
	req, err := newRangeRequest(src, size, off, n)
	if err != nil {
		return nil, "", err
	}
	return req.body, req.rg.String(), nil
}

// rangeRequest is what a range decrypt sends: the stream's start (its
// first start bytes) and the chunks that cover rg, in body.
type rangeRequest struct {
	start int64
	rg    cryptosvc.Range
	body  *spanReader
}

func newRangeRequest(src io.ReaderAt, size, off, n int64) (*rangeRequest, error) {
	rg := cryptosvc.Range{Off: off, Len: max(n, -1)}
	if off < 0 || n == 0 {
		return nil, errors.New("cipherd client: a range starts at 0 or later and holds at least one byte")
	}
	start, err := cryptosvc.StreamStart(src, size)
	if err != nil {
		return nil, rangeSourceError(err)
	}
	from, to, _, err := cryptosvc.RangeSpan(start, size, rg)
	if err != nil {
		return nil, rangeSourceError(err)
	}
	body := &spanReader{r: io.MultiReader(io.NewSectionReader(src, 0, start), io.NewSectionReader(src, from, to-from)), left: start + to - from}
	return &rangeRequest{start: start, rg: rg, body: body}, nil
}

// rangeSourceError is the error of a sealed stream the client could not
// take a range of, in the service's codes.
func rangeSourceError(err error) error {
	switch {
	case errors.Is(err, cryptosvc.ErrRangeNotSatisfiable):
		return &Error{API: api.Error{Code: api.CodeRangeNotSatisfiable, Message: "the range starts at or past the end of the plaintext"}}
	case errors.Is(err, cryptosvc.ErrTruncated):
		return &Error{API: api.Error{Code: api.CodeTruncated, Message: "the sealed stream is truncated"}}
	case errors.Is(err, cryptosvc.ErrMalformed), errors.Is(err, cryptosvc.ErrUnsupported):
		return &Error{API: api.Error{Code: api.CodeMalformed, Message: "not a cipherd sealed stream: " + err.Error()}}
	}
	return err // reading src failed
}

// spanReader is a range decrypt's body: it knows its length, which the
// upload then carries.
type spanReader struct {
	r    io.Reader
	left int64
}

func (s *spanReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.left -= int64(n)
	return n, err
}

func (s *spanReader) Len() int { return int(max(s.left, 0)) }
