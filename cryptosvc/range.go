package cryptosvc

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
)

// A range decrypt opens part of a sealed stream from its header, its body's
// start (salt and commitment) and only the chunks that cover the part
// (docs/FORMAT.md, Ranges). The chunks' nonces number them, so the index of
// the first chunk sent follows from where the range starts, and a chunk from
// another message, another place or another order does not authenticate.

// maxPlaintext is the longest plaintext the format allows: 2^38 chunks.
const maxPlaintext = maxChunks * ChunkSize

// Range names bytes of a message's plaintext: Len bytes from Off, or every
// byte from Off to the end when Len is negative. As with an HTTP byte range,
// a range that runs past the end of the plaintext ends with it, and one that
// starts at or past the end cannot be satisfied.
type Range struct {
	Off, Len int64
}

// ParseRange parses a range in the form of an HTTP byte range or curl's -r:
// "A-B" for bytes A to B inclusive, "A-" for byte A to the end. Both are
// decimal, without sign or spaces, and B is not below A.
func ParseRange(s string) (Range, error) {
	a, b, ok := strings.Cut(s, "-")
	off, err := parseOffset(a)
	if !ok || err != nil {
		return Range{}, errors.New(`cryptosvc: a range is "A-B" (bytes A to B inclusive) or "A-" (A to the end), in decimal`)
	}
	if b == "" {
		return Range{Off: off, Len: -1}, nil
	}
	last, err := parseOffset(b)
	if err != nil || last < off {
		return Range{}, errors.New(`cryptosvc: a range "A-B" has decimal A and B, with B not below A`)
	}
	// A range past the format's largest plaintext ends with it, as it
	// would with the plaintext's own end.
	last = min(last, maxPlaintext-1)
	if off > last {
		return Range{Off: off, Len: 1}, nil // starts past any plaintext: unsatisfiable
	}
	return Range{Off: off, Len: last - off + 1}, nil
}

// parseOffset parses a byte offset: decimal digits only.
func parseOffset(s string) (int64, error) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseInt(s, 10, 64)
}

// String returns the range in ParseRange's form.
func (r Range) String() string {
	s := strconv.FormatInt(r.Off, 10) + "-"
	if r.Len >= 0 {
		s += strconv.FormatInt(r.Off+r.Len-1, 10)
	}
	return s
}

func (r Range) valid() bool {
	return r.Off >= 0 && (r.Len < 0 || r.Len > 0 && r.Len <= maxPlaintext)
}

// RangeSpan returns the bytes [from, to) of a sealed stream of size bytes
// that a range decrypt of rg sends after the stream's first start bytes
// (its header, salt and commitment: StreamStart gives it): the chunks that
// cover the range, through the final chunk when the range reaches the end.
// n is the length of the range's plaintext, cut at the end of the
// plaintext that size implies. It fails with ErrRangeNotSatisfiable when
// the range starts at or past that end, and with ErrTruncated for a size no
// stream could have.
func RangeSpan(start, size int64, rg Range) (from, to, n int64, err error) {
	if !rg.valid() {
		return 0, 0, 0, ErrRangeNotSatisfiable
	}
	plain, ok := plaintextLen(size - start)
	if !ok {
		return 0, 0, 0, ErrTruncated
	}
	if rg.Off >= plain {
		return 0, 0, 0, ErrRangeNotSatisfiable
	}
	const full = ChunkSize + tagSize
	from = start + rg.Off/ChunkSize*full
	if rg.Len < 0 || rg.Off+rg.Len >= plain {
		return from, size, plain - rg.Off, nil
	}
	last := (rg.Off + rg.Len - 1) / ChunkSize
	return from, min(size, start+(last+1)*full), rg.Len, nil
}

// StreamStart reads the header of a sealed stream held in r and returns the
// length of its start: the header, salt and commitment that every range
// decrypt sends first.
func StreamStart(r io.ReaderAt, size int64) (int64, error) {
	_, hdr, err := ReadHeader(io.NewSectionReader(r, 0, size))
	if err != nil {
		return 0, err
	}
	return int64(len(hdr) + chunkedPrefix), nil
}

// RangeReader reads the plaintext of a range of a sealed stream, from the
// stream's start and the chunks that cover the range (Service.DecryptRange).
// Like DecryptReader, it returns only plaintext whose chunk authenticated;
// it returns io.EOF once the range is read and the input has ended where
// the range does, and any other end is an error.
type RangeReader struct {
	d    *DecryptReader
	left int64 // plaintext of the range not yet read; -1: to the end
	n    int64 // the plaintext length, when the input's size is known; else -1
	err  error // sticky
}

// DecryptRange opens the range rg of a sealed stream from r, which holds
// the stream's start (header, salt and commitment) followed by the chunks
// RangeSpan names, and nothing else. size is the length of all of r when
// known, else -1: a size whose chunks do not cover the range is refused
// before any chunk is read, and Len then tells the plaintext's length.
//
// The first chunk is read and authenticated before DecryptRange returns,
// so a stream of chunks from another message or another place fails here.
// When the chunks end with the final one, a range that runs past the end
// is cut there; a range that starts past it is ErrRangeNotSatisfiable. A
// range that reaches the end is complete only with the final chunk
// (chunks cut short are ErrTruncated), and more chunks than the range
// needs are ErrRangeMismatch.
func (s *Service) DecryptRange(ctx context.Context, name string, r io.Reader, size int64, rg Range, context []byte) (*RangeReader, error) {
	if !rg.valid() || rg.Off >= maxPlaintext {
		return nil, ErrRangeNotSatisfiable
	}
	h, hdr, err := ReadHeader(r)
	if err != nil {
		return nil, err
	}
	start := int64(len(hdr) + chunkedPrefix)
	keys, err := s.openStart(ctx, name, &h, context, readFullFrom(r))
	if err != nil {
		return nil, err
	}
	return newRangeReader(r, keys, infoOf(&h), start, size, rg)
}

// newRangeReader reads the range rg from r, which holds the chunks that
// cover it, keyed by keys; start is the length of the stream's start, which
// r no longer holds, and size that of the whole input, or -1.
func newRangeReader(r io.Reader, keys *chunkedKeys, info Info, start, size int64, rg Range) (*RangeReader, error) {
	n := int64(-1)
	if size >= 0 {
		var err error
		if n, err = rangeLen(size-start, rg); err != nil {
			return nil, err
		}
	}
	d := newDecryptReader(r, keys, info, start)
	d.chunk = uint64(rg.Off / ChunkSize)
	rr := &RangeReader{d: d, left: rg.Len, n: n}
	skip := int(rg.Off % ChunkSize)
	if _, err := d.next(nil); err != nil && err != io.EOF {
		rr.stop()
		return nil, err
	}
	if len(d.plain) <= skip { // only a short final chunk ends at or before skip
		rr.stop()
		return nil, ErrRangeNotSatisfiable
	}
	d.plain = d.plain[skip:]
	return rr, nil
}

// rangeLen returns the plaintext length of rg when the chunks that follow
// the stream's start are m bytes long, or why those chunks cannot be the
// ones RangeSpan names.
func rangeLen(m int64, rg Range) (int64, error) {
	const full = ChunkSize + tagSize
	fulls, rem := m/full, m%full
	if m <= 0 || rem > 0 && rem < tagSize {
		return 0, ErrTruncated // no chunk, or a last chunk too short for its tag
	}
	final := rem > 0
	sent := fulls // chunks sent
	plain := fulls * ChunkSize
	if final {
		sent++
		plain += rem - tagSize
	}
	skip := rg.Off % ChunkSize
	if plain <= skip {
		if final {
			return 0, ErrRangeNotSatisfiable
		}
		return 0, ErrTruncated
	}
	if rg.Len < 0 {
		if !final {
			return 0, ErrTruncated // the final chunk is missing
		}
		return plain - skip, nil
	}
	need := skip + rg.Len // plaintext from the first chunk's start to the range's end
	switch {
	case need >= plain && final:
		return plain - skip, nil // reaches the end: cut there
	case need > plain:
		return 0, ErrTruncated // chunks missing before the range's end
	case (need+ChunkSize-1)/ChunkSize < sent:
		return 0, ErrRangeMismatch // chunks past the range's end
	}
	return rg.Len, nil
}

// Info describes the message.
func (rr *RangeReader) Info() Info { return rr.d.info }

// Len returns the plaintext length of the range, when DecryptRange was
// given the input's size; otherwise -1.
func (rr *RangeReader) Len() int64 { return rr.n }

func (rr *RangeReader) Read(p []byte) (int, error) {
	if rr.err != nil {
		return 0, rr.err
	}
	if rr.left >= 0 && int64(len(p)) > rr.left {
		p = p[:rr.left]
	}
	if len(p) == 0 && rr.left != 0 {
		return 0, nil
	}
	n, err := 0, error(nil)
	if rr.left != 0 {
		n, err = rr.d.Read(p)
		if rr.left > 0 {
			rr.left -= int64(n)
		}
	}
	switch {
	case err == io.EOF:
		rr.err = io.EOF // the final chunk authenticated: the plaintext's end, where the range ends or is cut
	case err != nil:
		rr.err = err
	case rr.left == 0:
		if rr.err = rr.end(); rr.err == nil {
			rr.err = io.EOF
		}
	}
	if rr.err != nil {
		rr.stop()
	}
	if n > 0 {
		return n, nil
	}
	return 0, rr.err
}

// end checks, once the range is read, that the input ends where the range
// does: at once, or, when the range ends with its last chunk, after the
// empty final chunk of a plaintext whose length is a multiple of ChunkSize.
func (rr *RangeReader) end() error {
	d := rr.d
	if d.err == io.EOF {
		return nil // the final chunk was the range's last
	}
	if len(d.plain) > 0 {
		// The range ends inside the chunk it read last: any more input is
		// a chunk past it.
		var one [1]byte
		switch k, err := io.ReadFull(d.r, one[:]); {
		case k > 0:
			return ErrRangeMismatch
		case err != io.EOF:
			return err
		}
		return nil
	}
	k, err := io.ReadFull(d.r, d.buf[:tagSize+1])
	switch {
	case k == 0 && err == io.EOF:
		return nil
	case k == tagSize && err == io.ErrUnexpectedEOF:
		// An empty chunk: the final one, if it authenticates.
		_, err := d.keys.openChunk(d.buf[:0], &d.nonce, d.chunk, d.buf[:tagSize])
		return err
	case err != nil && err != io.EOF && err != io.ErrUnexpectedEOF:
		return err // the input failed
	}
	return ErrRangeMismatch
}

// stop ends the reader and gives back its chunk buffer.
func (rr *RangeReader) stop() {
	d := rr.d
	d.plain = nil
	if d.err == nil {
		d.err = ErrClosed
	}
	d.release()
}
