package cryptosvc

import (
	"errors"
	"io"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unsafe"
)

// A stream's chunks are sealed independently (chunk i under the base nonce
// XOR i), so a sealer that has the whole input at hand, a file, can seal
// them on every core while it reads the next ones. One goroutine reading
// and sealing in turn makes a local seal of a file in the page cache run at
// about 0.4× the kernel on one core (docs/BENCHMARKS.md, Local sealing).

// parallelBlock is how many chunks one piece of parallel work seals: 1 MiB
// of plaintext.
const parallelBlock = 64

// sealJob is one block of a stream sealed in parallel.
type sealJob struct {
	first uint64 // the block's first chunk
	in    []byte // plaintext, parallelBlock chunks' room; nil for SealBytes
	pt    []byte // the block's plaintext: in, or a part of SealBytes's src
	out   []byte // the sealed chunks
	final bool   // the block ends the message with its short final chunk
	err   error  // the block could not be read while it was sealed
	done  chan struct{}
}

// SealStream seals everything src yields into one message written to dst,
// as EncryptWriter does, chunk for chunk the same message, but reads src in
// blocks of 1 MiB and seals them on workers goroutines
// (runtime.GOMAXPROCS(0) when workers is 0) while it reads the next. It
// returns the plaintext length; after an error, what was written to dst is
// not a complete message.
func (l *LocalSealer) SealStream(dst io.Writer, src io.Reader, context []byte, workers int) (int64, error) {
	return l.sealParallel(dst, context, workers, nil, func(j *sealJob, _ uint64) (bool, error) {
		if j.in == nil {
			j.in = make([]byte, parallelBlock*ChunkSize)
		}
		n, err := io.ReadFull(src, j.in)
		j.pt = j.in[:n]
		switch err {
		case io.EOF, io.ErrUnexpectedEOF:
			return true, nil
		case nil:
			return false, nil
		}
		return false, err
	})
}

// ErrSourceFault is SealBytes's error when its plaintext could not be read:
// a memory-mapped file that was cut short while it was sealed.
var ErrSourceFault = errors.New("cryptosvc: the plaintext could not be read (a mapped file changed size)")

// SealBytes is SealStream with the whole plaintext in memory, typically a
// memory-mapped file: the workers seal straight from src, so no goroutine
// copies it first, and the pages of a mapped file are faulted in on every
// worker. A fault reading src, a mapped file truncated under the mapping,
// ends the seal with ErrSourceFault rather than the process.
func (l *LocalSealer) SealBytes(dst io.Writer, src []byte, context []byte, workers int) (int64, error) {
	return l.SealBytesDone(dst, src, context, workers, nil)
}

// SealBytesDone is SealBytes that also calls done (when it is not nil), on
// the worker that sealed it, with each block of src once the block is
// sealed and will not be read again. A caller that mapped src can let the
// block's pages go there, on every core as the seal moves on, rather than
// unmapping all of them on one core once it ends.
func (l *LocalSealer) SealBytesDone(dst io.Writer, src []byte, context []byte, workers int, done func(block []byte)) (int64, error) {
	const blockIn = parallelBlock * ChunkSize
	return l.sealParallel(dst, context, workers, done, func(j *sealJob, b uint64) (bool, error) {
		off := min(b*blockIn, uint64(len(src)))
		end := min(off+blockIn, uint64(len(src)))
		j.pt = src[off:end]
		return end == uint64(len(src)), nil
	})
}

// sealParallel writes the message's start to w, then the chunks of the
// plaintext that next puts in each block, sealed on workers goroutines, in
// order. next fills the block b of j and reports whether it is the last;
// done, when not nil, is called with each block's plaintext once sealed.
func (l *LocalSealer) sealParallel(w io.Writer, context []byte, workers int, done func([]byte), next func(j *sealJob, b uint64) (bool, error)) (int64, error) {
	start := append(make([]byte, 0, len(l.header)+chunkedPrefix), l.header...)
	keys, start, err := startBody(start, l.rand, l.im, l.input, context)
	if err != nil {
		return 0, err
	}
	if _, err := w.Write(start); err != nil {
		return 0, err
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	free := make(chan *sealJob, 2*workers+1)
	for range cap(free) {
		free <- &sealJob{out: make([]byte, 0, parallelBlock*(ChunkSize+tagSize))}
	}
	jobs := make(chan *sealJob, cap(free))
	order := make(chan *sealJob, cap(free))
	var sealers sync.WaitGroup
	for range workers {
		sealers.Add(1)
		go func() {
			defer sealers.Done()
			// A mapped source's fault panics here instead of killing
			// the process; seal turns it into the block's error.
			debug.SetPanicOnFault(true)
			var nonce [chunkNonceSize]byte
			for j := range jobs {
				j.seal(keys, &nonce)
				if done != nil && j.err == nil {
					done(j.pt)
				}
				// Only now: the writer hands j back for the next block
				// once it is done, and done read j.pt.
				close(j.done)
			}
		}()
	}
	var failed atomic.Bool
	werr := make(chan error, 1)
	go func() {
		var err error
		for j := range order {
			<-j.done
			if err == nil && j.err != nil {
				err = j.err
				failed.Store(true)
			}
			if err == nil {
				if _, err = w.Write(j.out); err != nil {
					failed.Store(true)
				}
			}
			free <- j
		}
		werr <- err
	}()

	var total int64
	var rerr error
	for b := uint64(0); !failed.Load(); b++ {
		j := <-free
		final, err := next(j, b)
		switch {
		case err != nil:
			rerr = err
		case !final && b*parallelBlock+parallelBlock >= maxChunks-1:
			rerr = ErrTooLarge
		}
		if rerr != nil {
			free <- j
			break
		}
		j.first, j.final, j.err, j.done = b*parallelBlock, final, nil, make(chan struct{})
		total += int64(len(j.pt))
		order <- j
		jobs <- j
		if final {
			break
		}
	}
	close(jobs)
	close(order)
	sealers.Wait()
	err = <-werr
	if rerr != nil {
		return total, rerr
	}
	if err == nil && failed.Load() {
		err = errors.New("cryptosvc: writing the sealed stream failed")
	}
	return total, err
}

// seal seals the block's chunks into out, with nonce as the nonce's
// storage. A memory fault reading the plaintext becomes j.err. The caller
// closes j.done.
func (j *sealJob) seal(keys *chunkedKeys, nonce *[chunkNonceSize]byte) {
	defer func() {
		// Only a fault in the plaintext's own memory is the source's: any
		// other panic is a bug and stays one.
		if r := recover(); r != nil {
			f, ok := r.(interface{ Addr() uintptr })
			if !ok || len(j.pt) == 0 {
				panic(r)
			}
			first := uintptr(unsafe.Pointer(unsafe.SliceData(j.pt)))
			if a := f.Addr(); a < first || a-first >= uintptr(len(j.pt)) {
				panic(r)
			}
			j.err = ErrSourceFault
		}
	}()
	out, pt, i := j.out[:0], j.pt, j.first
	for len(pt) >= ChunkSize {
		keys.chunkNonce(nonce, i)
		out = keys.aead.Seal(out, nonce[:], pt[:ChunkSize], nil)
		pt, i = pt[ChunkSize:], i+1
	}
	if j.final {
		keys.chunkNonce(nonce, i)
		out = keys.aead.Seal(out, nonce[:], pt, nil)
	}
	j.out = out
}
