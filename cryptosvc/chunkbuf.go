package cryptosvc

import "sync"

// Chunk buffers (one sealed chunk, ChunkSize + tag bytes) are pooled: a new
// stream would otherwise allocate and zero 16 KiB, a fifth of what setting
// up a stream costs. A stream takes one when it starts and gives it back,
// cleared, when it reaches its end (Close, the final chunk read, or an
// error), after which it never touches it again: every method checks the
// stream's sticky state first.
var chunkBufs = sync.Pool{New: func() any { return new([ChunkSize + tagSize]byte) }}

func getChunkBuf() []byte { return chunkBufs.Get().(*[ChunkSize + tagSize]byte)[:] }

// putChunkBuf clears b, which no longer holds anything the caller may read,
// and returns it to the pool.
func putChunkBuf(b []byte) {
	if cap(b) != ChunkSize+tagSize {
		return
	}
	b = b[:cap(b)]
	clear(b)
	chunkBufs.Put((*[ChunkSize + tagSize]byte)(b))
}
