package cryptosvc

import (
	"context"
	"io"
)

// DecryptWriter opens a sealed message written to it and writes the
// plaintext of each chunk, once that chunk has authenticated, to the
// underlying writer. It is DecryptReader turned around, for callers that
// push ciphertext (io.Copy from a source with WriteTo, a callback API): a
// whole chunk in one Write is opened straight from the caller's slice, with
// no copy, and ReadFrom reads a source straight into the chunk buffer. It
// holds at most one chunk.
//
// Close ends the message: it opens the final, short chunk and reports
// ErrTruncated if the message stopped early. Plaintext of the chunks before
// a failure has already been written; as with DecryptReader, only Close's
// nil error says the message was complete and authentic. The key is looked
// up when the header has arrived, so key errors come from Write or Close.
type DecryptWriter struct {
	// The body, once the header and commitment have arrived (keys is nil
	// until then, and buf[:have] gathers the header).
	chunkFeed
	w    io.Writer
	info Info

	// Before the header is complete: where to find the key.
	svc     *Service
	ctx     context.Context
	name    string
	context []byte

	err error // sticky; ErrClosed after Close
}

// DecryptWriter returns a writer that opens the sealed message written to it
// under key name and writes the plaintext to w.
func (s *Service) DecryptWriter(ctx context.Context, name string, w io.Writer, context []byte) *DecryptWriter {
	return &DecryptWriter{chunkFeed: chunkFeed{buf: getChunkBuf()}, w: w, svc: s, ctx: ctx, name: name, context: context}
}

// newDecryptWriter returns a writer of a body whose keys are known.
func newDecryptWriter(w io.Writer, keys *chunkedKeys, info Info) *DecryptWriter {
	return &DecryptWriter{chunkFeed: chunkFeed{keys: keys, buf: getChunkBuf()}, w: w, info: info}
}

// Info describes the message; it is known once the header has been written.
func (d *DecryptWriter) Info() Info { return d.info }

// Write takes more of the sealed message.
func (d *DecryptWriter) Write(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	n := 0
	if d.keys == nil {
		n = copy(d.buf[d.have:], p)
		d.have += n
		p = p[n:]
		if started, err := d.start(); err != nil || !started {
			return n, err
		}
	}
	k, err := d.write(p, d)
	if err != nil {
		d.err = err
	}
	return n + k, err
}

// ReadFrom reads the sealed message from r straight into the chunk buffer
// until r ends, opening each chunk as it completes; io.Copy uses it for a
// source without WriteTo. It does not close the writer: Close still ends the
// message.
func (d *DecryptWriter) ReadFrom(r io.Reader) (int64, error) {
	if d.err != nil {
		return 0, d.err
	}
	var n int64
	for d.keys == nil {
		k, err := r.Read(d.buf[d.have:])
		d.have += k
		n += int64(k)
		if _, serr := d.start(); serr != nil {
			return n, serr
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
	k, failed, err := d.readFrom(r, d)
	if failed != nil {
		d.err, err = failed, failed
	}
	return n + k, err
}

// plaintext writes a chunk's plaintext to the underlying writer; after a
// failed write, the stream is over.
func (d *DecryptWriter) plaintext(p []byte) (kept bool, err error) {
	_, err = d.w.Write(p)
	return false, err
}

// start parses the header and commitment once they are in buf, and keeps
// what follows them as the start of the first chunk. It reports whether the
// body has started.
func (d *DecryptWriter) start() (bool, error) {
	pend := d.buf[:d.have]
	h, hn, err := ParseHeader(pend)
	switch {
	case err == ErrTruncated && len(pend) < len(d.buf):
		return false, nil
	case err != nil:
		d.err = err
		return false, err
	case len(pend) < hn+chunkedPrefix:
		return false, nil
	}
	keys, err := d.svc.openStart(d.ctx, d.name, &h, d.context, func(p []byte) error {
		copy(p, pend[hn:])
		return nil
	})
	if err != nil {
		d.err = err
		return false, err
	}
	d.keys, d.info = keys, infoOf(&h)
	d.svc, d.ctx, d.context = nil, nil, nil
	d.have = copy(d.buf, pend[hn+chunkedPrefix:])
	return true, nil
}

// Close opens the final chunk. It returns nil only when the whole message
// arrived and authenticated; later writes fail with ErrClosed. It does not
// close the underlying writer.
func (d *DecryptWriter) Close() error {
	if d.err != nil {
		if d.err == ErrClosed {
			return nil
		}
		return d.err
	}
	if d.keys == nil {
		h, _, err := ParseHeader(d.buf[:d.have])
		if err != nil {
			d.err = err
			return err
		}
		// The header, but not all of the commitment: the key it names is
		// looked up first, as DecryptReader does, so that a message both
		// cut short and under an unknown key fails the same way on every
		// path.
		if _, err = d.svc.openStart(d.ctx, d.name, &h, d.context, func([]byte) error { return ErrTruncated }); err == nil {
			err = ErrTruncated
		}
		d.err = err
		return err
	}
	plain, err := d.openFinal()
	if err == nil {
		_, err = d.plaintext(plain)
	}
	if err != nil {
		d.err = err
		return err
	}
	putChunkBuf(d.buf)
	d.buf = nil
	d.err = ErrClosed
	return nil
}
