package cryptosvc

import (
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
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
	in    []byte // plaintext, parallelBlock chunks' room
	pt    []byte // what was read into in
	out   []byte // the sealed chunks
	final bool   // the block ends the message with its short final chunk
	done  chan struct{}
}

// SealStream seals everything src yields into one message written to dst,
// as EncryptWriter does, chunk for chunk the same message, but reads src in
// blocks of 1 MiB and seals them on workers goroutines
// (runtime.GOMAXPROCS(0) when workers is 0) while it reads the next. It
// returns the plaintext length; after an error, what was written to dst is
// not a complete message.
func (l *LocalSealer) SealStream(dst io.Writer, src io.Reader, context []byte, workers int) (int64, error) {
	start := append(make([]byte, 0, len(l.header)+chunkedPrefix), l.header...)
	keys, start, err := startBody(start, l.rand, l.im, l.input, context)
	if err != nil {
		return 0, err
	}
	if _, err := dst.Write(start); err != nil {
		return 0, err
	}
	return sealParallel(dst, src, keys, workers)
}

// sealParallel writes the chunks of the plaintext src yields, sealed under
// keys from chunk 0, to w in order, sealing blocks on workers goroutines.
func sealParallel(w io.Writer, r io.Reader, keys *chunkedKeys, workers int) (int64, error) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	const blockIn = parallelBlock * ChunkSize
	free := make(chan *sealJob, 2*workers+1)
	for range cap(free) {
		free <- &sealJob{in: make([]byte, blockIn), out: make([]byte, 0, parallelBlock*(ChunkSize+tagSize))}
	}
	jobs := make(chan *sealJob, cap(free))
	order := make(chan *sealJob, cap(free))
	var sealers sync.WaitGroup
	for range workers {
		sealers.Add(1)
		go func() {
			defer sealers.Done()
			var nonce [chunkNonceSize]byte
			for j := range jobs {
				j.seal(keys, &nonce)
			}
		}()
	}
	var failed atomic.Bool
	werr := make(chan error, 1)
	go func() {
		var err error
		for j := range order {
			<-j.done
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
		n, err := io.ReadFull(r, j.in)
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			j.final = true
		case err != nil:
			rerr = err
		case b*parallelBlock+parallelBlock >= maxChunks-1:
			rerr = ErrTooLarge
		default:
			j.final = false
		}
		if rerr != nil {
			free <- j
			break
		}
		j.first, j.pt, j.done = b*parallelBlock, j.in[:n], make(chan struct{})
		total += int64(n)
		order <- j
		jobs <- j
		if j.final {
			break
		}
	}
	close(jobs)
	close(order)
	sealers.Wait()
	err := <-werr
	if rerr != nil {
		return total, rerr
	}
	if err == nil && failed.Load() {
		err = errors.New("cryptosvc: writing the sealed stream failed")
	}
	return total, err
}

// seal seals the block's chunks into out, with nonce as the nonce's
// storage.
func (j *sealJob) seal(keys *chunkedKeys, nonce *[chunkNonceSize]byte) {
	defer close(j.done)
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
