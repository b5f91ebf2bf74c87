package cryptosvc

import "io"

// chunkFeed opens a sealed body pushed to it in pieces of any size: the push
// side that DecryptWriter and DecryptReader.WriteTo share. A full chunk is
// never the final one (that one is always short), so each is opened as soon
// as it is complete: straight from the caller's slice when one piece holds it
// whole, otherwise from buf, where the pieces are gathered. Either way the
// plaintext lands in buf and goes to a plainSink; what a failure does to the
// stream is the caller's business.
type chunkFeed struct {
	keys  *chunkedKeys
	buf   []byte // a pooled chunk buffer: buf[:have] gathered, then opened in place
	have  int
	chunk uint64
	nonce [chunkNonceSize]byte // here, not on the stack: it would escape per chunk
}

// plainSink takes the plaintext of each chunk that authenticated. When it
// cannot deliver it, kept reports whether it holds on to the rest (so that
// the chunk counts as taken from the caller) or drops it with the stream.
type plainSink interface {
	plaintext(p []byte) (kept bool, err error)
}

const sealedChunkSize = ChunkSize + tagSize

// write feeds p, opening every chunk it completes, and returns how much of p
// it took: all of it, or up to the chunk that failed or whose plaintext the
// sink refused.
func (f *chunkFeed) write(p []byte, sink plainSink) (int, error) {
	n := 0
	for len(p) > 0 {
		if f.have == 0 && len(p) >= sealedChunkSize {
			taken, err := f.openFull(p[:sealedChunkSize], sink)
			if taken {
				p, n = p[sealedChunkSize:], n+sealedChunkSize
			}
			if err != nil {
				return n, err
			}
			continue
		}
		k := copy(f.buf[f.have:sealedChunkSize], p)
		f.have, p, n = f.have+k, p[k:], n+k
		if f.have == sealedChunkSize {
			f.have = 0
			if _, err := f.openFull(f.buf[:sealedChunkSize], sink); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// readFrom reads r straight into buf until r ends, opening every chunk it
// completes. It returns a chunk that failed or a refusal of the sink as
// failed, and r's own error (not io.EOF) as rerr.
func (f *chunkFeed) readFrom(r io.Reader, sink plainSink) (n int64, failed, rerr error) {
	for {
		k, err := r.Read(f.buf[f.have:sealedChunkSize])
		f.have += k
		n += int64(k)
		if f.have == sealedChunkSize {
			f.have = 0
			if _, failed := f.openFull(f.buf[:sealedChunkSize], sink); failed != nil {
				return n, failed, nil
			}
		}
		if err == io.EOF {
			return n, nil, nil
		}
		if err != nil {
			return n, nil, err
		}
	}
}

// openFull opens a full chunk into buf and hands its plaintext to sink. It
// reports whether the chunk was taken: opened, and delivered or kept.
func (f *chunkFeed) openFull(chunk []byte, sink plainSink) (taken bool, err error) {
	if f.chunk >= maxChunks-1 {
		return false, ErrTooLarge
	}
	plain, err := f.keys.openChunk(f.buf[:0], &f.nonce, f.chunk, chunk)
	if err != nil {
		return false, err
	}
	f.chunk++
	kept, err := sink.plaintext(plain)
	return err == nil || kept, err
}

// openFinal opens what was gathered when the body ended: the final chunk,
// short (every full one was opened as it completed), or ErrTruncated.
func (f *chunkFeed) openFinal() ([]byte, error) {
	if f.have < tagSize {
		return nil, ErrTruncated
	}
	k := f.have
	f.have = 0
	plain, err := f.keys.openChunk(f.buf[:0], &f.nonce, f.chunk, f.buf[:k])
	if err != nil {
		return nil, err
	}
	f.chunk++
	return plain, nil
}
