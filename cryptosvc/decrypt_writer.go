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
	w    io.Writer
	keys *chunkedKeys // nil until the header and commitment have arrived
	info Info

	// Before the header is complete: where to find the key.
	svc     *Service
	ctx     context.Context
	name    string
	context []byte

	// pend holds the header, then the start of a chunk (cap ChunkSize + tag);
	// a chunk is opened into it, in place when it was gathered there, and
	// its plaintext written from it.
	pend  []byte
	chunk uint64
	nonce [chunkNonceSize]byte
	err   error // sticky; ErrClosed after Close
}

// DecryptWriter returns a writer that opens the sealed message written to it
// under key name and writes the plaintext to w.
func (s *Service) DecryptWriter(ctx context.Context, name string, w io.Writer, context []byte) *DecryptWriter {
	return &DecryptWriter{w: w, svc: s, ctx: ctx, name: name, context: context, pend: getChunkBuf()[:0]}
}

// newDecryptWriter returns a writer of a body whose keys are known.
func newDecryptWriter(w io.Writer, keys *chunkedKeys, info Info) *DecryptWriter {
	return &DecryptWriter{w: w, keys: keys, info: info, pend: getChunkBuf()[:0]}
}

// Info describes the message; it is known once the header has been written.
func (d *DecryptWriter) Info() Info { return d.info }

// Write takes more of the sealed message.
func (d *DecryptWriter) Write(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	const full = ChunkSize + tagSize
	n := len(p)
	if d.keys == nil {
		k := min(len(p), cap(d.pend)-len(d.pend))
		d.pend = append(d.pend, p[:k]...)
		p = p[k:]
		if started, err := d.start(); err != nil || !started {
			return n - len(p), err
		}
	}
	for len(p) > 0 {
		if len(d.pend) == 0 && len(p) >= full {
			// A whole chunk in the caller's slice. A full chunk is never the
			// final one, so it can be opened now.
			if err := d.open(p[:full]); err != nil {
				return n - len(p), err
			}
			p = p[full:]
			continue
		}
		k := copy(d.pend[len(d.pend):full], p)
		d.pend, p = d.pend[:len(d.pend)+k], p[k:]
		if len(d.pend) == full {
			if err := d.open(d.pend); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

// ReadFrom reads the sealed message from r straight into the chunk buffer
// until r ends, opening each chunk as it completes; io.Copy uses it for a
// source without WriteTo. It does not close the writer: Close still ends the
// message.
func (d *DecryptWriter) ReadFrom(r io.Reader) (int64, error) {
	const full = ChunkSize + tagSize
	var n int64
	for {
		if d.err != nil {
			return n, d.err
		}
		k, err := r.Read(d.pend[len(d.pend):full])
		d.pend = d.pend[:len(d.pend)+k]
		n += int64(k)
		if d.keys == nil {
			if _, serr := d.start(); serr != nil {
				return n, serr
			}
		} else if len(d.pend) == full {
			if oerr := d.open(d.pend); oerr != nil {
				return n, oerr
			}
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// start parses the header and commitment once they are in pend, and keeps
// what follows them as the start of the first chunk. It reports whether the
// body has started.
func (d *DecryptWriter) start() (bool, error) {
	h, hn, err := ParseHeader(d.pend)
	switch {
	case err == ErrTruncated && len(d.pend) < cap(d.pend):
		return false, nil
	case err != nil:
		d.err = err
		return false, err
	case len(d.pend) < hn+chunkedPrefix:
		return false, nil
	}
	keys, err := d.svc.openStart(d.ctx, d.name, &h, d.context, func(p []byte) error {
		copy(p, d.pend[hn:])
		return nil
	})
	if err != nil {
		d.err = err
		return false, err
	}
	d.keys, d.info = keys, infoOf(&h)
	d.svc, d.ctx, d.context = nil, nil, nil
	rest := copy(d.pend, d.pend[hn+chunkedPrefix:])
	d.pend = d.pend[:rest]
	return true, nil
}

// open authenticates one chunk, from the caller's slice or from pend itself,
// into pend, writes its plaintext, and leaves pend empty.
func (d *DecryptWriter) open(chunk []byte) error {
	if d.chunk >= maxChunks-1 && len(chunk) == ChunkSize+tagSize {
		d.err = ErrTooLarge
		return d.err
	}
	plain, err := d.keys.openChunk(d.pend[:0], &d.nonce, d.chunk, chunk)
	d.pend = d.pend[:0]
	if err != nil {
		d.err = err
		return err
	}
	d.chunk++
	if _, err := d.w.Write(plain); err != nil {
		d.err = err
		return err
	}
	return nil
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
		if _, _, err := ParseHeader(d.pend); err != nil {
			d.err = err
			return err
		}
		d.err = ErrTruncated // the header, but not all of the commitment
		return d.err
	}
	if len(d.pend) < tagSize {
		d.err = ErrTruncated
		return d.err
	}
	if err := d.open(d.pend); err != nil {
		return err
	}
	putChunkBuf(d.pend)
	d.pend = nil
	d.err = ErrClosed
	return nil
}
