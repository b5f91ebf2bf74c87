package cryptosvc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cipherd/cipherd/kernels"
)

// Compare the streaming benchmarks with BenchmarkRawAEAD, the selected kernel
// sealing 16 KiB chunks in place with nothing else around it:
//
//	go test -run '^$' -bench 'RawAEAD|Stream' -benchmem ./cryptosvc

var benchSizes = []int64{1 << 20, 1 << 30}

// BenchmarkRawAEAD is the ceiling: Seal of one 16 KiB chunk with the
// implementation the service uses.
func BenchmarkRawAEAD(b *testing.B) {
	for _, c := range SealAEADs {
		b.Run(c.String(), func(b *testing.B) {
			a, err := kernels.Available(c)[0].NewAEAD(make([]byte, c.KeySize()))
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, ChunkSize+tagSize)
			nonce := make([]byte, 12)
			b.SetBytes(ChunkSize)
			b.ReportAllocs()
			for b.Loop() {
				nonce[0]++
				a.Seal(buf[:0], nonce, buf[:ChunkSize], nil)
			}
		})
	}
}

// zeroReader yields n zero bytes without holding them.
type zeroReader struct{ n int64 }

func (z *zeroReader) Read(p []byte) (int, error) {
	if z.n <= 0 {
		return 0, io.EOF
	}
	k := int(min(int64(len(p)), z.n))
	clear(p[:k])
	z.n -= int64(k)
	return k, nil
}

// BenchmarkStreamSeal encrypts a whole stream per op, through ReadFrom as a
// server copying a request body does, into io.Discard.
func BenchmarkStreamSeal(b *testing.B) {
	ctx := context.Background()
	for _, c := range SealAEADs {
		s := newTestService(b, c)
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/%s", c, byteSize(size)), func(b *testing.B) {
				b.SetBytes(size)
				b.ReportAllocs()
				for b.Loop() {
					w, err := s.EncryptWriter(ctx, "k", io.Discard, nil)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := w.ReadFrom(&zeroReader{size}); err != nil {
						b.Fatal(err)
					}
					if err := w.Close(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// sealedZeros returns a reader over a sealed stream of size zero bytes,
// produced chunk by chunk as it is read so that 1 GiB needs no 1 GiB buffer:
// every full chunk of zeros under the same key differs only by its nonce, so
// the chunks are sealed on the fly.
type sealedStream struct {
	head  []byte
	keys  *chunkedKeys
	size  int64
	chunk uint64
	buf   []byte
	pend  []byte
	done  bool
	nonce [chunkNonceSize]byte // here: on the stack it would escape per chunk
}

func newSealedZeros(b *testing.B, s *Service, size int64) func() io.Reader {
	var hdr bytes.Buffer
	w, err := s.EncryptWriter(context.Background(), "k", &hdr, nil)
	if err != nil {
		b.Fatal(err)
	}
	head := bytes.Clone(hdr.Bytes())
	keys := w.keys
	return func() io.Reader {
		return &sealedStream{head: head, keys: keys, size: size, buf: make([]byte, ChunkSize+tagSize)}
	}
}

func (z *sealedStream) Read(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if len(z.head) > 0 {
			k := copy(p, z.head)
			z.head, p, n = z.head[k:], p[k:], n+k
			continue
		}
		if len(z.pend) == 0 {
			if z.done {
				break
			}
			l := int(min(z.size, ChunkSize))
			z.size -= int64(l)
			z.keys.chunkNonce(&z.nonce, z.chunk)
			z.chunk++
			clear(z.buf[:l])
			z.pend = z.keys.aead.Seal(z.buf[:0], z.nonce[:], z.buf[:l], nil)
			z.done = l < ChunkSize
		}
		k := copy(p, z.pend)
		z.pend, p, n = z.pend[k:], p[k:], n+k
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// BenchmarkStreamOpen decrypts a whole stream per op into io.Discard. The
// input is produced by sealing on the fly, so its cost (one Seal per chunk)
// is included: compare with StreamSeal + RawAEAD, or read ns/op minus the
// RawAEAD time per chunk.
func BenchmarkStreamOpen(b *testing.B) {
	ctx := context.Background()
	for _, c := range SealAEADs {
		s := newTestService(b, c)
		for _, size := range benchSizes {
			src := newSealedZeros(b, s, size)
			b.Run(fmt.Sprintf("%s/%s", c, byteSize(size)), func(b *testing.B) {
				b.SetBytes(size)
				b.ReportAllocs()
				for b.Loop() {
					r, err := s.DecryptReader(ctx, "k", src(), nil)
					if err != nil {
						b.Fatal(err)
					}
					if n, err := r.WriteTo(io.Discard); err != nil || n != size {
						b.Fatal(n, err)
					}
				}
			})
		}
	}
}

// BenchmarkStreamOpenOnly decrypts an in-memory 1 MiB stream: the open path
// alone, for the comparison with RawAEAD.
func BenchmarkStreamOpenOnly(b *testing.B) {
	ctx := context.Background()
	for _, c := range SealAEADs {
		s := newTestService(b, c)
		var buf bytes.Buffer
		w, _ := s.EncryptWriter(ctx, "k", &buf, nil)
		w.ReadFrom(&zeroReader{1 << 20})
		w.Close()
		ct := buf.Bytes()
		b.Run(fmt.Sprintf("%s/1MiB", c), func(b *testing.B) {
			b.SetBytes(1 << 20)
			b.ReportAllocs()
			for b.Loop() {
				r, err := s.DecryptReader(ctx, "k", bytes.NewReader(ct), nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := r.WriteTo(io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSeal64 is a one-shot Seal of 64 bytes, key derivation included.
func BenchmarkSeal64(b *testing.B) {
	ctx := context.Background()
	pt := make([]byte, 64)
	for _, c := range SealAEADs {
		s := newTestService(b, c)
		b.Run(c.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := s.Seal(ctx, "k", pt, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpen64 is a one-shot Open of a 64-byte message.
func BenchmarkOpen64(b *testing.B) {
	ctx := context.Background()
	for _, c := range SealAEADs {
		s := newTestService(b, c)
		ct, _, _ := s.Seal(ctx, "k", make([]byte, 64), nil)
		b.Run(c.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := s.Open(ctx, "k", ct, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStreamHeap encrypts then decrypts 1 GiB and reports the largest
// heap in use seen while doing so (sampled between chunks).
func BenchmarkStreamHeap(b *testing.B) {
	ctx := context.Background()
	s := newTestService(b, kernels.AES128GCM)
	const size = 1 << 30
	src := newSealedZeros(b, s, size)
	for b.Loop() {
		runtime.GC()
		var base runtime.MemStats
		runtime.ReadMemStats(&base)
		peak := &heapPeak{base: base.HeapAlloc}
		w, _ := s.EncryptWriter(ctx, "k", peak, nil)
		w.ReadFrom(&zeroReader{size})
		w.Close()
		r, _ := s.DecryptReader(ctx, "k", src(), nil)
		r.WriteTo(peak)
		b.ReportMetric(float64(peak.max), "peak-heap-B")
	}
}

// heapPeak is an io.Writer that discards, sampling the heap every 64 writes.
type heapPeak struct {
	base, max uint64
	n         int
}

func (h *heapPeak) Write(p []byte) (int, error) {
	if h.n++; h.n%64 == 0 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		if m.HeapAlloc > h.base && m.HeapAlloc-h.base > h.max {
			h.max = m.HeapAlloc - h.base
		}
	}
	return len(p), nil
}

func median(x []float64) float64 {
	x = slices.Clone(x)
	slices.Sort(x)
	if len(x)%2 == 1 {
		return x[len(x)/2]
	}
	return (x[len(x)/2-1] + x[len(x)/2]) / 2
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dB", n)
}

// Streams allocate per stream, never per chunk: twice the data, the same
// number of allocations.
func TestStreamAllocationsPerChunk(t *testing.T) {
	if testing.Short() || underRace {
		t.Skip("allocation counts")
	}
	ctx := context.Background()
	s := newTestService(t, kernels.AES256GCM)
	allocs := func(size int64) (seal, open float64) {
		var buf bytes.Buffer
		w, _ := s.EncryptWriter(ctx, "k", &buf, nil)
		w.ReadFrom(&zeroReader{size})
		w.Close()
		ct := buf.Bytes()
		seal = testing.AllocsPerRun(5, func() {
			w, _ := s.EncryptWriter(ctx, "k", io.Discard, nil)
			w.ReadFrom(&zeroReader{size})
			w.Close()
		})
		open = testing.AllocsPerRun(5, func() {
			r, _ := s.DecryptReader(ctx, "k", bytes.NewReader(ct), nil)
			r.WriteTo(io.Discard)
		})
		return seal, open
	}
	s1, o1 := allocs(64 * ChunkSize)
	s2, o2 := allocs(128 * ChunkSize)
	if s1 != s2 || o1 != o2 {
		t.Fatalf("allocations grow with the stream: seal %v→%v, open %v→%v", s1, s2, o1, o2)
	}
	t.Logf("allocations per stream: seal %v, open %v", s1, o1)
}

// BenchmarkStreamVsRaw measures, alternating within one loop so that the
// machine's noise hits both alike, whole streams of 1 MiB and 1 GiB against
// the raw AEAD sealing (opening) the same 16 KiB chunks, and reports each
// stream path's throughput as a fraction of the raw kernel's in the same
// direction.
//
// The raw kernel does the kernel's share of the work the stream does: it
// seals each 16 KiB of the same plaintext into one 16 KiB buffer, or opens
// each chunk of the same sealed stream into one, with the message's own key
// and nonces, and nothing else around the call. Everything else a stream
// does counts against it: setting up (a fresh data key and its wrap, two key
// derivations: about 5 % of a 1 MiB stream), the empty final chunk, moving
// the bytes between source, buffer and destination, the calls through
// io.Reader and io.Writer.
//
// The kernel reading its input from memory is not free either, and the
// ceiling the goal names is the kernel on one buffer held in L1: the
// metrics seal-memory/in-place and open-memory/in-place give the raw kernel
// over the stream's memory as a fraction of the raw kernel in place on one
// buffer, so that a path's fraction of the in-place kernel is the product
// of the two. A 1 MiB source sits in L2, where this costs about 1 %; a
// 1 GiB one comes from DRAM, where it costs the kernel itself 10–25 % on the
// development host.
//
// The paths:
//
//	seal-write          EncryptWriter.Write of the whole plaintext (io.Copy from a bytes.Reader)
//	seal-readfrom       EncryptWriter.ReadFrom a bytes.Reader, which it lets write to it
//	seal-readfrom-read  EncryptWriter.ReadFrom a source with Read only (a socket, a pipe)
//	open-write          DecryptWriter.Write of the whole sealed stream
//	open-writeto        DecryptReader.WriteTo from a bytes.Reader, which it lets write to it
//	open-writeto-read   DecryptReader.WriteTo from a source with Read only
//	open-read           DecryptReader.Read into a 1 MiB buffer, from a bytes.Reader
//
// A source with Read only hands over its bytes through a copy into the
// chunk buffer, which the io.Reader contract requires, and Read receives the
// ciphertext the same way: against a 12.6 GB/s kernel that copy costs about
// a tenth of the time, so those paths stay under the others.
func BenchmarkStreamVsRaw(b *testing.B) {
	ctx := context.Background()
	for _, size := range benchSizes {
		plain := make([]byte, size)
		for i := range plain {
			plain[i] = byte(i) // written, so that no page is the shared zero page
		}
		for _, c := range SealAEADs {
			s := newTestService(b, c)
			var sealed bytes.Buffer
			sealed.Grow(int(chunkedLen(size)) + 256)
			w, _ := s.EncryptWriter(ctx, "k", &sealed, nil)
			w.Write(plain)
			keys := w.keys
			w.Close()
			chunks := sealed.Bytes()[sealed.Len()-int(chunkedLen(size)):]
			buf := make([]byte, ChunkSize+tagSize)
			out := make([]byte, 1<<20)
			b.Run(fmt.Sprintf("%s/%s", c, byteSize(size)), func(b *testing.B) {
				type path struct {
					name string
					open bool
					run  func()
				}
				paths := []path{
					{"seal-write", false, func() {
						w, _ := s.EncryptWriter(ctx, "k", io.Discard, nil)
						w.Write(plain)
						w.Close()
					}},
					{"seal-readfrom", false, func() {
						w, _ := s.EncryptWriter(ctx, "k", io.Discard, nil)
						w.ReadFrom(bytes.NewReader(plain))
						w.Close()
					}},
					{"seal-readfrom-read", false, func() {
						w, _ := s.EncryptWriter(ctx, "k", io.Discard, nil)
						w.ReadFrom(readOnly{bytes.NewReader(plain)})
						w.Close()
					}},
					{"open-write", true, func() {
						w := s.DecryptWriter(ctx, "k", io.Discard, nil)
						w.Write(sealed.Bytes())
						w.Close()
					}},
					{"open-writeto", true, func() {
						r, _ := s.DecryptReader(ctx, "k", bytes.NewReader(sealed.Bytes()), nil)
						r.WriteTo(io.Discard)
					}},
					{"open-writeto-read", true, func() {
						r, _ := s.DecryptReader(ctx, "k", readOnly{bytes.NewReader(sealed.Bytes())}, nil)
						r.WriteTo(io.Discard)
					}},
					{"open-read", true, func() {
						r, _ := s.DecryptReader(ctx, "k", bytes.NewReader(sealed.Bytes()), nil)
						for {
							if _, err := r.Read(out); err != nil {
								break
							}
						}
					}},
				}
				var nonce [chunkNonceSize]byte
				rawSeal := func() {
					for i := range size / ChunkSize {
						keys.chunkNonce(&nonce, uint64(i))
						keys.aead.Seal(buf[:0], nonce[:], plain[i*ChunkSize:(i+1)*ChunkSize], nil)
					}
				}
				rawOpen := func() {
					const full = ChunkSize + tagSize
					for i := range size / ChunkSize {
						if _, err := keys.openChunk(buf[:0], &nonce, uint64(i), chunks[i*full:(i+1)*full]); err != nil {
							panic(err)
						}
					}
				}
				var fixed [chunkNonceSize]byte // not nonce, which the raw runs change
				ct := keys.aead.Seal(nil, fixed[:], buf[:ChunkSize], nil)
				inPlace := [2]func(){
					func() {
						for range size / ChunkSize {
							keys.aead.Seal(buf[:0], fixed[:], buf[:ChunkSize], nil)
						}
					},
					func() {
						for range size / ChunkSize {
							if _, err := keys.aead.Open(buf[:0], fixed[:], ct, nil); err != nil {
								panic(err)
							}
						}
					},
				}
				// One ratio per path and per iteration; the median of each is
				// reported, so that a preemption, which lands on the path or
				// on a raw run, moves no metric.
				ratios := make([][]float64, len(paths)+2)
				for b.Loop() {
					// Each path between two runs of the raw kernel in the same
					// direction, so that a change of clock or of load on the
					// other core affects both alike.
					for i, p := range paths {
						r := rawSeal
						if p.open {
							r = rawOpen
						}
						t0 := time.Now()
						r()
						t1 := time.Now()
						p.run()
						t2 := time.Now()
						r()
						t3 := time.Now()
						raw := (t1.Sub(t0) + t3.Sub(t2)) / 2
						ratios[i] = append(ratios[i], float64(raw)/float64(t2.Sub(t1)))
					}
					for d, r := range [2]func(){rawSeal, rawOpen} {
						t0 := time.Now()
						inPlace[d]()
						t1 := time.Now()
						r()
						t2 := time.Now()
						ratios[len(paths)+d] = append(ratios[len(paths)+d], float64(t1.Sub(t0))/float64(t2.Sub(t1)))
					}
				}
				for i, p := range paths {
					b.ReportMetric(median(ratios[i]), p.name+"/raw")
				}
				b.ReportMetric(median(ratios[len(paths)]), "seal-memory/in-place")
				b.ReportMetric(median(ratios[len(paths)+1]), "open-memory/in-place")
			})
		}
	}
}

// BenchmarkStreamSetup is the fixed cost of a stream: a new data key,
// wrapped, the body's keys derived, the header written, and an empty final
// chunk sealed; then the same message opened.
func BenchmarkStreamSetup(b *testing.B) {
	ctx := context.Background()
	for _, c := range SealAEADs {
		s := newTestService(b, c)
		var sealed bytes.Buffer
		w, _ := s.EncryptWriter(ctx, "k", &sealed, nil)
		w.Close()
		b.Run(c.String()+"/seal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w, err := s.EncryptWriter(ctx, "k", io.Discard, nil)
				if err != nil {
					b.Fatal(err)
				}
				w.Close()
			}
		})
		b.Run(c.String()+"/open", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r, err := s.DecryptReader(ctx, "k", bytes.NewReader(sealed.Bytes()), nil)
				if err != nil {
					b.Fatal(err)
				}
				r.WriteTo(io.Discard)
			}
		})
	}
}
