package cryptosvc

import (
	"errors"
	"io"
)

// EncryptWriter seals what is written to it, one 16 KiB chunk at a time, and
// writes the chunks to the underlying writer. It holds at most one chunk.
// Close seals the final, short chunk; without it the message is truncated.
type EncryptWriter struct {
	w     io.Writer
	keys  *chunkedKeys
	buf   []byte // ChunkSize + tag: plaintext waiting, then its sealed chunk
	n     int    // plaintext bytes in buf
	chunk uint64
	nonce [chunkNonceSize]byte // here, not on the stack: it would escape per chunk
	err   error                // sticky
	info  Info
	// pushing is set while ReadFrom's source writes to the writer: a
	// source's WriteTo may call ReadFrom back (bufio.Reader does), which must
	// then read.
	pushing bool
}

func newEncryptWriter(w io.Writer, keys *chunkedKeys, info Info) *EncryptWriter {
	return &EncryptWriter{w: w, keys: keys, buf: getChunkBuf(), info: info}
}

// Info describes the message being written.
func (e *EncryptWriter) Info() Info { return e.info }

// Write seals p as it fills chunks. It returns an error if an earlier write
// failed or the writer is closed.
func (e *EncryptWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	written := 0
	for len(p) > 0 {
		if e.n == 0 && len(p) >= ChunkSize {
			// A whole chunk from p: seal it straight into buf, no copy.
			if err := e.flush(p[:ChunkSize]); err != nil {
				return written, err
			}
			p, written = p[ChunkSize:], written+ChunkSize
			continue
		}
		k := copy(e.buf[e.n:ChunkSize], p)
		e.n += k
		p, written = p[k:], written+k
		if e.n == ChunkSize {
			if err := e.flush(e.buf[:ChunkSize]); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// ReadFrom seals everything r yields. When r is an io.WriterTo (a
// bytes.Reader, a bytes.Buffer, a bufio.Reader…), it lets r write to the
// writer, so that whole chunks are sealed straight from r's memory;
// otherwise it reads into the chunk buffer directly. It does not close the
// writer.
func (e *EncryptWriter) ReadFrom(r io.Reader) (int64, error) {
	if e.err != nil {
		return 0, e.err
	}
	if wt, ok := r.(io.WriterTo); ok && !e.pushing {
		e.pushing = true
		n, err := wt.WriteTo(e)
		e.pushing = false
		switch {
		case e.err != nil:
			return n, e.err // the writer's own record, whatever r reports
		case err == io.EOF: // not WriteTo's to return, but the end all the same
			return n, nil
		}
		return n, err
	}
	var total int64
	for {
		k, err := r.Read(e.buf[e.n:ChunkSize])
		e.n += k
		total += int64(k)
		if e.n == ChunkSize {
			if ferr := e.flush(e.buf[:ChunkSize]); ferr != nil {
				return total, ferr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// flush seals one full chunk of plaintext p into buf and writes it out.
func (e *EncryptWriter) flush(p []byte) error {
	if e.chunk >= maxChunks-1 {
		e.err = ErrTooLarge
		return e.err
	}
	if err := e.seal(p); err != nil {
		return err
	}
	e.n = 0
	return nil
}

func (e *EncryptWriter) seal(p []byte) error {
	e.keys.chunkNonce(&e.nonce, e.chunk)
	ct := e.keys.aead.Seal(e.buf[:0], e.nonce[:], p, nil)
	e.chunk++
	if _, err := e.w.Write(ct); err != nil {
		e.err = err
		return err
	}
	return nil
}

// Close seals and writes the final chunk. It does not close the underlying
// writer. Later writes fail with ErrClosed.
func (e *EncryptWriter) Close() error {
	if e.err != nil {
		if e.err == ErrClosed {
			return nil
		}
		return e.err
	}
	err := e.seal(e.buf[:e.n])
	putChunkBuf(e.buf)
	e.buf = nil
	if err != nil {
		return err // sticky: seal set e.err
	}
	e.err = ErrClosed
	return nil
}

// DecryptReader opens a sealed message as it is read, one chunk at a time,
// and returns only plaintext whose chunk authenticated. It returns io.EOF
// only after the final chunk authenticated; a truncated, extended or modified
// message yields an error instead, and every read after an error returns it
// again.
type DecryptReader struct {
	// buf holds one sealed chunk, opened in place; a source that pushes
	// (see pushFrom) goes through the feed.
	chunkFeed
	r      io.Reader
	plain  []byte // authenticated plaintext not yet read
	err    error  // sticky; io.EOF after the final chunk
	info   Info
	prefix int64 // the length of the stream's start: header, salt and commitment

	// While WriteTo lets a source that is an io.WriterTo push the chunks:
	// where the plaintext goes, how much went, and the failed write to it.
	w      io.Writer
	pushed int64
	werr   error
}

func newDecryptReader(r io.Reader, keys *chunkedKeys, info Info, prefix int64) *DecryptReader {
	return &DecryptReader{chunkFeed: chunkFeed{keys: keys, buf: getChunkBuf()}, r: r, info: info, prefix: prefix}
}

// Info describes the message being read.
func (d *DecryptReader) Info() Info { return d.info }

// PlaintextLen returns the length of the plaintext of the stream when the
// whole stream, its start included, is size bytes long, and false for a
// size no stream with this start can have. The length is what the chunks'
// framing implies: reading still authenticates every chunk and fails on a
// stream that is cut or forged, whatever its length.
func (d *DecryptReader) PlaintextLen(size int64) (int64, bool) {
	return plaintextLen(size - d.prefix)
}

// plaintextLen inverts chunkedLen: the plaintext length of m bytes of
// chunks, every one full but the final one, which holds at least its tag.
func plaintextLen(m int64) (int64, bool) {
	if m < tagSize {
		return 0, false
	}
	full, final := m/(ChunkSize+tagSize), m%(ChunkSize+tagSize)
	if final < tagSize {
		return 0, false
	}
	return full*ChunkSize + final - tagSize, true
}

func (d *DecryptReader) Read(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if len(d.plain) == 0 {
			if d.err != nil {
				break
			}
			if len(p) >= ChunkSize {
				// Open the next chunk straight into p.
				k, err := d.next(p[:0])
				n, p = n+k, p[k:]
				if err != nil {
					break
				}
				continue
			}
			d.next(nil)
			continue
		}
		k := copy(p, d.plain)
		d.plain = d.plain[k:]
		n, p = n+k, p[k:]
	}
	if n > 0 || len(d.plain) > 0 { // an empty p with plaintext pending is not the end
		return n, nil
	}
	d.release()
	return 0, d.err
}

// release returns the chunk buffer once the reader has ended and nothing in
// it is left to read.
func (d *DecryptReader) release() {
	if d.buf != nil && d.err != nil && len(d.plain) == 0 {
		putChunkBuf(d.buf)
		d.buf = nil
	}
}

// WriteTo writes the plaintext to w as chunks authenticate. When the source
// is an io.WriterTo (a bytes.Reader, a bytes.Buffer, a bufio.Reader…), it
// lets the source push the sealed chunks, and opens whole chunks straight
// from the source's memory.
func (d *DecryptReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if len(d.plain) > 0 {
			k, err := w.Write(d.plain)
			total += int64(k)
			d.plain = d.plain[k:]
			if err != nil {
				return total, err
			}
			continue
		}
		if d.err != nil {
			d.release()
			if d.err == io.EOF {
				return total, nil
			}
			return total, d.err
		}
		if wt, ok := d.r.(io.WriterTo); ok && d.w == nil {
			k, err := d.pushFrom(wt, w)
			total += k
			if err != nil {
				return total, err
			}
			continue
		}
		d.next(nil)
	}
}

// pushFrom has the source write the rest of the message to push (and so the
// plaintext to w), then opens the final chunk, or records why the message
// ended early. It returns the plaintext written and a failed write to w, in
// which case the rest of that chunk's plaintext is left in d.plain and the
// reader can go on.
func (d *DecryptReader) pushFrom(wt io.WriterTo, w io.Writer) (int64, error) {
	d.w, d.pushed = w, 0
	_, err := wt.WriteTo((*decryptPush)(d))
	n, werr := d.pushed, d.werr
	d.w, d.pushed, d.werr = nil, 0, nil
	switch {
	case werr != nil:
		return n, werr
	case d.err != nil: // a chunk failed; the reader's own record, whatever the source reports
	case err != nil && err != io.EOF:
		d.err = err // the source failed
	default:
		// The source ended: what it left is the final chunk.
		plain, oerr := d.openFinal()
		if oerr != nil {
			d.err = oerr
			break
		}
		d.plain, d.err = plain, io.EOF
	}
	return n, nil
}

// decryptPush is the writer a DecryptReader hands to its source's WriteTo:
// the feed opens the chunks, and each chunk's plaintext goes to w once it has
// authenticated.
type decryptPush DecryptReader

func (p *decryptPush) Write(b []byte) (int, error) {
	d := (*DecryptReader)(p)
	if err := d.pushErr(); err != nil {
		return 0, err
	}
	n, err := d.write(b, p)
	d.pushFailed(err)
	return n, err
}

// ReadFrom reads straight into buf: a source whose WriteTo falls back on
// io.Copy (an *os.File, a bufio.Reader over a plain reader) comes here.
func (p *decryptPush) ReadFrom(r io.Reader) (int64, error) {
	d := (*DecryptReader)(p)
	if err := d.pushErr(); err != nil {
		return 0, err
	}
	n, failed, err := d.readFrom(r, p)
	if failed != nil {
		d.pushFailed(failed)
		return n, failed
	}
	return n, err
}

// plaintext writes a chunk's plaintext to w; after a failed write the rest
// of it stays in d.plain, for the reader to go on with.
func (p *decryptPush) plaintext(plain []byte) (kept bool, err error) {
	d := (*DecryptReader)(p)
	k, err := d.w.Write(plain)
	d.pushed += int64(k)
	if err == nil && k < len(plain) {
		err = io.ErrShortWrite
	}
	if err != nil {
		d.plain, d.werr = plain[k:], err
	}
	return true, err
}

// pushErr is the error that stops a push: a chunk that failed, or a failed
// write to w.
func (d *DecryptReader) pushErr() error {
	if d.err != nil {
		return d.err
	}
	return d.werr
}

// pushFailed records a failure of the push other than a failed write to w,
// which the reader recovers from: the stream's own, sticky.
func (d *DecryptReader) pushFailed(err error) {
	if err != nil && d.werr == nil {
		d.err = err
	}
}

// next reads and opens one chunk. With dst non-nil, the plaintext goes to dst
// (which has room for a full chunk) and its length is returned; otherwise it
// is left in d.plain.
func (d *DecryptReader) next(dst []byte) (int, error) {
	const full = ChunkSize + tagSize
	k, err := io.ReadFull(d.r, d.buf[:full])
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		if k < tagSize {
			d.err = ErrTruncated
			return 0, d.err
		}
	case err != nil:
		d.err = err
		return 0, err
	case d.chunk >= maxChunks-1:
		d.err = ErrTooLarge
		return 0, d.err
	}
	intoBuf := dst == nil
	if intoBuf {
		dst = d.buf[:0] // open in place
	}
	plain, oerr := d.keys.openChunk(dst, &d.nonce, d.chunk, d.buf[:k])
	if oerr != nil {
		d.err = oerr
		return 0, d.err
	}
	d.chunk++
	if k < full {
		d.err = io.EOF // the short final chunk: the message is complete
	}
	if intoBuf {
		d.plain = plain
		return 0, nil
	}
	return len(plain), nil
}

// ReaderAt opens any byte range of a sealed message held in an io.ReaderAt,
// reading and authenticating only the chunks the range touches. The final
// chunk is authenticated when the ReaderAt is made, so Size is trustworthy.
// It is safe for concurrent use.
type ReaderAt struct {
	r    io.ReaderAt
	base int64 // offset of chunk 0 in r
	size int64 // plaintext length
	keys *chunkedKeys
	info Info
}

// Info describes the message.
func (ra *ReaderAt) Info() Info { return ra.info }

// Size returns the plaintext length.
func (ra *ReaderAt) Size() int64 { return ra.size }

func newReaderAt(r io.ReaderAt, base, total int64, keys *chunkedKeys, info Info) (*ReaderAt, error) {
	const full = ChunkSize + tagSize
	l := total - base
	if l < tagSize {
		return nil, ErrTruncated
	}
	last := l / full
	rem := l % full
	if rem < tagSize {
		return nil, ErrTruncated // a message whose final chunk is full or cut
	}
	if last >= maxChunks {
		return nil, ErrTooLarge
	}
	ra := &ReaderAt{r: r, base: base, size: last*ChunkSize + rem - tagSize, keys: keys, info: info}
	buf := make([]byte, rem)
	if _, err := ra.openChunk(buf, last, buf); err != nil {
		return nil, err
	}
	return ra, nil
}

// openChunk reads chunk i into buf (sized to the chunk) and opens it into dst.
func (ra *ReaderAt) openChunk(buf []byte, i int64, dst []byte) ([]byte, error) {
	got, err := ra.r.ReadAt(buf, ra.base+i*(ChunkSize+tagSize))
	if got < len(buf) {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, ErrTruncated // the source is shorter than the size given
		}
		return nil, err
	}
	var nonce [chunkNonceSize]byte
	return ra.keys.openChunk(dst[:0], &nonce, uint64(i), buf)
}

// ReadAt reads len(p) bytes of plaintext from offset off, authenticating each
// chunk it touches. Like any io.ReaderAt it returns an error (io.EOF at the
// end of the message) whenever it reads fewer than len(p) bytes.
func (ra *ReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("cryptosvc: negative offset")
	}
	if off >= ra.size {
		if len(p) == 0 && off == ra.size {
			return 0, nil
		}
		return 0, io.EOF
	}
	var buf []byte
	n := 0
	for len(p) > 0 && off < ra.size {
		i := off / ChunkSize
		within := int(off % ChunkSize)
		clen := min(int64(ChunkSize), ra.size-i*ChunkSize)
		if buf == nil {
			buf = make([]byte, ChunkSize+tagSize)
		}
		plain, err := ra.openChunk(buf[:clen+tagSize], i, buf)
		if err != nil {
			return n, err
		}
		k := copy(p, plain[within:])
		n, p, off = n+k, p[k:], off+int64(k)
	}
	if len(p) > 0 {
		return n, io.EOF
	}
	return n, nil
}
