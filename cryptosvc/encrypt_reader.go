package cryptosvc

import (
	"context"
	"io"
)

// EncryptReader is the pull form of EncryptWriter: reading it yields the
// sealed stream (header first) of the plaintext it reads from its source,
// one 16 KiB chunk at a time. It suits a server that hands a reader to its
// HTTP stack as the response body.
type EncryptReader struct {
	src   io.Reader
	keys  *chunkedKeys
	buf   []byte // one chunk: plaintext read in, sealed in place
	out   []byte // sealed bytes not yet returned
	chunk uint64
	nonce [chunkNonceSize]byte
	done  bool  // the final chunk is in out
	err   error // sticky
	info  Info
	start int // the length of the stream's start: header, salt and commitment
}

// Info describes the message being produced.
func (e *EncryptReader) Info() Info { return e.info }

// EncryptReader returns a reader of the sealed stream of src's plaintext
// under the latest version of key name, bound to context.
func (s *Service) EncryptReader(ctx context.Context, name string, src io.Reader, context []byte) (*EncryptReader, error) {
	keys, head, info, err := s.startStream(ctx, name, context)
	if err != nil {
		return nil, err
	}
	// The start of the stream is returned first, then buf holds chunks.
	return &EncryptReader{src: src, keys: keys, buf: getChunkBuf(), out: head, info: info, start: len(head)}, nil
}

// SealedLen returns the length of the stream the reader yields when its
// source holds n bytes of plaintext: a server that knows the length of an
// upload can announce the length of its answer.
func (e *EncryptReader) SealedLen(n int64) int64 { return int64(e.start) + chunkedLen(n) }

// StartLen returns the length of the stream's start (header, salt and
// commitment), which the reader yields before it reads its source.
func (e *EncryptReader) StartLen() int { return e.start }

func (e *EncryptReader) Read(p []byte) (int, error) {
	for len(e.out) == 0 {
		if e.err == nil && e.done {
			e.err = io.EOF
		}
		if e.err != nil {
			if e.buf != nil { // the end: nothing of buf is left to return
				putChunkBuf(e.buf)
				e.buf = nil
			}
			return 0, e.err
		}
		e.fill()
	}
	n := copy(p, e.out)
	e.out = e.out[n:]
	return n, nil
}

// fill reads the next chunk of plaintext and seals it into out.
func (e *EncryptReader) fill() {
	n, err := io.ReadFull(e.src, e.buf[:ChunkSize])
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		e.done = true // a short read: the final chunk
	case err != nil:
		e.err = err
		return
	case e.chunk >= maxChunks-1:
		e.err = ErrTooLarge
		return
	}
	e.keys.chunkNonce(&e.nonce, e.chunk)
	e.out = e.keys.aead.Seal(e.buf[:0], e.nonce[:], e.buf[:n], nil)
	e.chunk++
}
