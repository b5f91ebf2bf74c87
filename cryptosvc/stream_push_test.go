package cryptosvc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha512"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/cipherd/cipherd/kernels"
)

// The streams hand themselves to a source that is an io.WriterTo
// (EncryptWriter.ReadFrom, DecryptReader.WriteTo) and read a plain reader
// straight into their chunk buffer (those two, and DecryptWriter.ReadFrom).
// Every kind of source must give the same plaintext, and the same errors,
// as the plain read loop.

// source is one way of handing a stream its input.
type source struct {
	name string
	new  func(b []byte, rng *rand.Rand) io.Reader
}

var sources = []source{
	{"bytes.Reader", func(b []byte, _ *rand.Rand) io.Reader { return bytes.NewReader(b) }},
	{"bytes.Buffer", func(b []byte, _ *rand.Rand) io.Reader { return bytes.NewBuffer(bytes.Clone(b)) }},
	// bufio.Reader's WriteTo calls the writer's ReadFrom back with a plain reader.
	{"bufio over a plain reader", func(b []byte, _ *rand.Rand) io.Reader {
		return bufio.NewReaderSize(readOnly{bytes.NewReader(b)}, 4096)
	}},
	// … and hands on to the WriteTo of a reader that has one.
	{"bufio over a bytes.Reader", func(b []byte, _ *rand.Rand) io.Reader { return bufio.NewReader(bytes.NewReader(b)) }},
	{"plain reader", func(b []byte, _ *rand.Rand) io.Reader { return readOnly{bytes.NewReader(b)} }},
	{"one byte at a time", func(b []byte, _ *rand.Rand) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) }},
	{"short reads", func(b []byte, rng *rand.Rand) io.Reader { return &shortReader{b: b, rng: rng} }},
	{"WriteTo in pieces", func(b []byte, rng *rand.Rand) io.Reader { return &piecesWriterTo{b: b, rng: rng} }},
	{"WriteTo calls ReadFrom back", func(b []byte, rng *rand.Rand) io.Reader { return &readsBack{shortReader{b: b, rng: rng}} }},
	{"MultiReader", func(b []byte, _ *rand.Rand) io.Reader {
		h := len(b) / 3
		return io.MultiReader(bytes.NewReader(b[:h]), readOnly{bytes.NewReader(b[h : 2*h])}, bytes.NewReader(b[2*h:]))
	}},
}

// shortReader returns at most a few thousand bytes a read, of random length,
// and sometimes none.
type shortReader struct {
	b   []byte
	rng *rand.Rand
}

func (r *shortReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.rng.IntN(5000))], r.b)
	r.b = r.b[n:]
	return n, nil
}

// piecesWriterTo writes its bytes in writes of random length, some of them
// over a chunk.
type piecesWriterTo struct {
	b   []byte
	rng *rand.Rand
}

func (r *piecesWriterTo) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

func (r *piecesWriterTo) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for len(r.b) > 0 {
		k := min(len(r.b), 1+r.rng.IntN(3*ChunkSize))
		n, err := w.Write(r.b[:k])
		r.b, total = r.b[n:], total+int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// readsBack is a WriterTo that gives its work back to the writer's ReadFrom,
// as os.File's and bufio.Reader's do.
type readsBack struct{ shortReader }

func (r *readsBack) WriteTo(w io.Writer) (int64, error) {
	if rf, ok := w.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(w, readOnly{r})
}

var errSource = errors.New("test: the source failed")

// failingSource yields n bytes of b through Read, then errSource;
// failingWriterTo does the same through WriteTo.
type failingSource struct {
	b []byte
	n int
}

func (r *failingSource) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errSource
	}
	k := copy(p[:min(len(p), r.n)], r.b)
	r.b, r.n = r.b[k:], r.n-k
	return k, nil
}

type failingWriterTo struct{ failingSource }

func (r *failingWriterTo) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(r.b[:r.n])
	if err != nil {
		return int64(n), err
	}
	return int64(n), errSource
}

func (s source) describe(n int) string { return fmt.Sprintf("%s, %d bytes", s.name, n) }

var pushSizes = []int{0, 1, tagSize, ChunkSize - 1, ChunkSize, ChunkSize + 1, 2*ChunkSize + tagSize, 3*ChunkSize + 5, 4 * ChunkSize}

func pushPlaintext(n int, rng *rand.Rand) []byte {
	pt := make([]byte, n)
	for i := range pt {
		pt[i] = byte(rng.Uint32())
	}
	return pt
}

func TestEncryptWriterReadFromSources(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range SealAEADs {
		s := newTestService(t, c)
		for _, n := range pushSizes {
			pt := pushPlaintext(n, rng)
			for _, src := range sources {
				// Some of it written first, so that ReadFrom starts in the
				// middle of a chunk.
				for _, head := range []int{0, min(n, 1000)} {
					var sealed bytes.Buffer
					w, err := s.EncryptWriter(ctx, "k", &sealed, []byte("ctx"))
					if err != nil {
						t.Fatal(err)
					}
					w.Write(pt[:head])
					got, err := w.ReadFrom(src.new(pt[head:], rng))
					if err != nil || got != int64(n-head) {
						t.Fatalf("%s %s: ReadFrom: %d, %v", c, src.describe(n), got, err)
					}
					if err := w.Close(); err != nil {
						t.Fatal(err)
					}
					opened, _, err := s.Open(ctx, "k", sealed.Bytes(), []byte("ctx"))
					if err != nil || !bytes.Equal(opened, pt) {
						t.Fatalf("%s %s from %d: Open: %v, equal %v", c, src.describe(n), head, err, bytes.Equal(opened, pt))
					}
				}
			}
		}
	}
}

// A source that fails mid-stream: ReadFrom returns its error and the writer
// stays usable, as with a plain reader; a destination that fails is sticky.
func TestEncryptWriterReadFromErrors(t *testing.T) {
	ctx := context.Background()
	s := newTestService(t, kernels.AES128GCM)
	pt := pushPlaintext(3*ChunkSize+7, rand.New(rand.NewPCG(5, 6)))
	for _, push := range []bool{false, true} {
		var sealed bytes.Buffer
		w, _ := s.EncryptWriter(ctx, "k", &sealed, nil)
		var src io.Reader = &failingSource{b: pt, n: ChunkSize + 100}
		if push {
			src = &failingWriterTo{failingSource{b: pt, n: ChunkSize + 100}}
		}
		if n, err := w.ReadFrom(src); err != errSource || n != ChunkSize+100 {
			t.Fatalf("push %v: ReadFrom: %d, %v; want %d, the source's error", push, n, err, ChunkSize+100)
		}
		w.Write(pt[ChunkSize+100:])
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if opened, _, err := s.Open(ctx, "k", sealed.Bytes(), nil); err != nil || !bytes.Equal(opened, pt) {
			t.Fatalf("push %v: after a source error: %v", push, err)
		}

		fw := &failingWriter{after: 2}
		w, _ = s.EncryptWriter(ctx, "k", fw, nil) // the header is write 1
		src = readOnly{bytes.NewReader(pt)}
		if push {
			src = bytes.NewReader(pt)
		}
		if _, err := w.ReadFrom(src); err != errSink {
			t.Fatalf("push %v: ReadFrom into a failing writer: %v", push, err)
		}
		if _, err := w.ReadFrom(bytes.NewReader(pt)); err != errSink {
			t.Errorf("push %v: ReadFrom after a failed write: %v, want it again", push, err)
		}
		if err := w.Close(); err != errSink {
			t.Errorf("push %v: Close after a failed write: %v", push, err)
		}
	}
}

var errSink = errors.New("test: the destination failed")

// failingWriter accepts its first after-1 writes and part of the next, then
// fails every write.
type failingWriter struct {
	after int
	n     int
	got   bytes.Buffer
}

func (w *failingWriter) Write(p []byte) (int, error) {
	w.n++
	if w.n < w.after {
		return w.got.Write(p)
	}
	if w.n == w.after {
		w.got.Write(p[:len(p)/2])
		return len(p) / 2, errSink
	}
	return 0, errSink
}

// openAll opens ct through every path that takes a source: DecryptReader's
// WriteTo and Read, and DecryptWriter's ReadFrom through io.Copy.
func openAll(t *testing.T, s *Service, ct []byte, src source, rng *rand.Rand) map[string]struct {
	out []byte
	err error
} {
	t.Helper()
	ctx := context.Background()
	res := map[string]struct {
		out []byte
		err error
	}{}
	// WriteTo, and WriteTo after a Read that leaves part of a chunk.
	for _, first := range []int{0, 100} {
		r, err := s.DecryptReader(ctx, tpKey, src.new(ct, rng), tpContext)
		if err != nil {
			res["DecryptReader"] = struct {
				out []byte
				err error
			}{nil, err}
			return res
		}
		out := make([]byte, first, 4*ChunkSize)
		k, rerr := io.ReadFull(r, out)
		out = out[:k]
		var buf bytes.Buffer
		n, err := r.WriteTo(&buf)
		if rerr != nil && rerr != io.ErrUnexpectedEOF && rerr != io.EOF {
			err = rerr
		}
		if n != int64(buf.Len()) {
			t.Errorf("%s: WriteTo reports %d bytes, wrote %d", src.name, n, buf.Len())
		}
		out = append(out, buf.Bytes()...)
		// The end, or the error, stays.
		if k, err2 := r.Read(make([]byte, ChunkSize+1)); k != 0 || (err == nil && err2 != io.EOF) || (err != nil && err2 != err) {
			t.Errorf("%s: Read after WriteTo: %d, %v; WriteTo gave %v", src.name, k, err2, err)
		}
		if k, err2 := r.WriteTo(io.Discard); k != 0 || err2 != err {
			t.Errorf("%s: WriteTo again: %d, %v; want 0, %v", src.name, k, err2, err)
		}
		res[fmt.Sprintf("WriteTo after reading %d", first)] = struct {
			out []byte
			err error
		}{out, err}
	}
	// Read into a buffer larger than a chunk.
	if r, err := s.DecryptReader(ctx, tpKey, src.new(ct, rng), tpContext); err == nil {
		var out []byte
		buf := make([]byte, 2*ChunkSize+3)
		for err == nil {
			var k int
			k, err = r.Read(buf)
			out = append(out, buf[:k]...)
		}
		if err == io.EOF {
			err = nil
		}
		res["Read"] = struct {
			out []byte
			err error
		}{out, err}
	}
	// io.Copy into a DecryptWriter: Write from a WriterTo, else ReadFrom.
	var buf bytes.Buffer
	dw := s.DecryptWriter(ctx, tpKey, &buf, tpContext)
	_, err := io.Copy(dw, src.new(ct, rng))
	if err == nil {
		err = dw.Close()
	}
	res["io.Copy to DecryptWriter"] = struct {
		out []byte
		err error
	}{buf.Bytes(), err}
	return res
}

func TestDecryptSources(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range SealAEADs {
		s := tpService(t, c)
		for _, n := range pushSizes {
			pt := pushPlaintext(n, rng)
			for _, mode := range []Mode{ModeDirect, ModeEnvelope} {
				ct := tpSeal(t, s, tpKey, mode, pt)
				for _, src := range sources {
					for how, r := range openAll(t, s, ct, src, rng) {
						if r.err != nil || !bytes.Equal(r.out, pt) {
							t.Errorf("%s %s %s, %s: %d bytes, %v", c, mode, src.describe(n), how, len(r.out), r.err)
						}
					}
				}
			}
		}
	}
}

// checkFailure opens bad through every source and path: each yields the
// plaintext of the chunks before the damage, exactly, and the error.
func checkFailure(t *testing.T, m *tpMessage, what string, bad []byte, w tpWant, rng *rand.Rand) {
	t.Helper()
	for _, src := range sources {
		for how, r := range openAll(t, m.s, bad, src, rng) {
			want := max(w.stream, 0)
			if !errors.Is(r.err, w.err) || len(r.out) != want || !bytes.Equal(r.out, m.pt[:want]) {
				t.Errorf("%s: %s, %s: %d bytes, %v; want %d, %v", what, src.name, how, len(r.out), r.err, want, w.err)
			}
		}
	}
}

func TestDecryptSourcesTruncated(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, m := range tpMessages(t) {
		t.Run(m.name, func(t *testing.T) {
			cuts := []int{0, 3, m.chunks - 1, m.chunks, m.chunks + 1}
			for i := 0; i < m.nchunks; i++ {
				b := m.chunks + i*(ChunkSize+tagSize)
				cuts = append(cuts, b+tagSize-1, b+tagSize, b+ChunkSize, b+ChunkSize+tagSize-1, b+ChunkSize+tagSize)
			}
			cuts = append(cuts, len(m.ct)-1)
			cuts = slices.DeleteFunc(cuts, func(c int) bool { return c >= len(m.ct) })
			for _, cut := range cuts {
				what := fmt.Sprintf("cut to %d of %d bytes", cut, len(m.ct))
				if cut < m.chunks {
					checkFailure(t, m, what, m.ct[:cut], tpWant{ErrTruncated, -1, -1}, rng)
					continue
				}
				full, rest := (cut-m.chunks)/(ChunkSize+tagSize), (cut-m.chunks)%(ChunkSize+tagSize)
				w := tpWant{ErrAuthFailed, full * ChunkSize, -1}
				if rest < tagSize {
					w.err = ErrTruncated
				}
				checkFailure(t, m, what, m.ct[:cut], w, rng)
			}
		})
	}
}

func TestDecryptSourcesTampered(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, m := range tpMessages(t) {
		t.Run(m.name, func(t *testing.T) {
			for _, r := range m.regions {
				if r.chunk < 0 {
					continue // the header: the same parser whatever the source
				}
				for _, pos := range []int{r.start, (r.start + r.end) / 2, r.end - 1} {
					bad := bytes.Clone(m.ct)
					bad[pos] ^= 0x20
					checkFailure(t, m, fmt.Sprintf("%s: byte %d", r.name, pos), bad, m.expect(r, bad, pos), rng)
				}
			}
			const sealed = ChunkSize + tagSize
			c := m.ct[m.chunks:]
			for _, tc := range []struct {
				what string
				bad  []byte
				want tpWant
			}{
				{"one byte after the final chunk", tpJoin(m.ct, []byte{0}), tpWant{ErrAuthFailed, 2 * ChunkSize, -1}},
				{"final chunk repeated", tpJoin(m.ct, c[2*sealed:]), tpWant{ErrAuthFailed, 2 * ChunkSize, -1}},
				{"chunks 0 and 1 swapped", tpJoin(m.ct[:m.chunks], c[sealed:2*sealed], c[:sealed], c[2*sealed:]), tpWant{ErrAuthFailed, 0, -1}},
				{"final chunk dropped", m.ct[:m.chunks+2*sealed], tpWant{ErrTruncated, 2 * ChunkSize, -1}},
			} {
				checkFailure(t, m, tc.what, tc.bad, tc.want, rng)
			}
		})
	}
}

// A source that fails mid-stream: WriteTo returns its error, after the
// plaintext of the chunks that arrived whole, and keeps returning it.
func TestDecryptReaderWriteToSourceError(t *testing.T) {
	ctx := context.Background()
	s := newTestService(t, kernels.AES128GCM)
	pt := pushPlaintext(3*ChunkSize+7, rand.New(rand.NewPCG(13, 14)))
	var sealed bytes.Buffer
	w, _ := s.EncryptWriter(ctx, "k", &sealed, nil)
	w.Write(pt)
	w.Close()
	ct := sealed.Bytes()
	hdr := len(ct) - int(chunkedLen(int64(len(pt))))
	for _, push := range []bool{false, true} {
		for _, at := range []int{hdr, hdr + 5, hdr + ChunkSize + tagSize, hdr + 2*(ChunkSize+tagSize) - 1} {
			fs := failingSource{b: ct, n: at}
			var src io.Reader = &fs
			if push {
				src = &failingWriterTo{fs}
			}
			r, err := s.DecryptReader(ctx, "k", src, nil)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			n, err := r.WriteTo(&out)
			want := (at - hdr) / (ChunkSize + tagSize) * ChunkSize
			if err != errSource || n != int64(want) || !bytes.Equal(out.Bytes(), pt[:want]) {
				t.Errorf("push %v, fails at %d: %d bytes, %v; want %d, the source's error", push, at, n, err, want)
			}
			if k, err := r.WriteTo(&out); k != 0 || err != errSource {
				t.Errorf("push %v: WriteTo again: %d, %v", push, k, err)
			}
			if k, err := r.Read(make([]byte, 10)); k != 0 || err != errSource {
				t.Errorf("push %v: Read after: %d, %v", push, k, err)
			}
		}
	}
}

// A destination that fails: WriteTo returns its error; what it did not take
// is kept, and the next WriteTo goes on from there.
func TestDecryptReaderWriteToDestinationError(t *testing.T) {
	ctx := context.Background()
	s := newTestService(t, kernels.AES128GCM)
	pt := pushPlaintext(4*ChunkSize+7, rand.New(rand.NewPCG(15, 16)))
	var sealed bytes.Buffer
	w, _ := s.EncryptWriter(ctx, "k", &sealed, nil)
	w.Write(pt)
	w.Close()
	for _, src := range sources {
		r, err := s.DecryptReader(ctx, "k", src.new(sealed.Bytes(), rand.New(rand.NewPCG(1, 1))), nil)
		if err != nil {
			t.Fatal(err)
		}
		fw := &failingWriter{after: 2}
		n, err := r.WriteTo(fw)
		if err != errSink || n != int64(fw.got.Len()) {
			t.Errorf("%s: WriteTo a failing writer: %d (it took %d), %v", src.name, n, fw.got.Len(), err)
		}
		var rest bytes.Buffer
		if _, err := r.WriteTo(&rest); err != nil {
			t.Errorf("%s: WriteTo after the destination failed: %v", src.name, err)
		}
		if got := append(fw.got.Bytes(), rest.Bytes()...); !bytes.Equal(got, pt) {
			t.Errorf("%s: %d + %d bytes, not the plaintext", src.name, fw.got.Len(), rest.Len())
		}
	}
}

// DecryptWriter.ReadFrom reads the header and the chunks straight into its
// buffer, however short the reads.
func TestDecryptWriterReadFrom(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(17, 18))
	s := newTestService(t, kernels.ChaCha20Poly1305)
	for _, n := range pushSizes {
		pt := pushPlaintext(n, rng)
		var sealed bytes.Buffer
		w, _ := s.EncryptWriter(ctx, "k", &sealed, nil)
		w.Write(pt)
		w.Close()
		ct := sealed.Bytes()
		for _, src := range []io.Reader{readOnly{bytes.NewReader(ct)}, iotest.OneByteReader(bytes.NewReader(ct)), &shortReader{ct, rng}, iotest.DataErrReader(bytes.NewReader(ct))} {
			var out bytes.Buffer
			dw := s.DecryptWriter(ctx, "k", &out, nil)
			if k, err := dw.ReadFrom(src); err != nil || k != int64(len(ct)) {
				t.Fatalf("%d bytes, %T: ReadFrom: %d, %v", n, src, k, err)
			}
			if err := dw.Close(); err != nil || !bytes.Equal(out.Bytes(), pt) {
				t.Fatalf("%d bytes, %T: Close: %v", n, src, err)
			}
			if _, err := dw.ReadFrom(bytes.NewReader(ct)); err != ErrClosed {
				t.Errorf("ReadFrom after Close: %v", err)
			}
		}
		// Cut short, and with a byte too many.
		for _, bad := range [][]byte{ct[:len(ct)-1], tpJoin(ct, []byte{0})} {
			dw := s.DecryptWriter(ctx, "k", io.Discard, nil)
			_, err := dw.ReadFrom(readOnly{bytes.NewReader(bad)})
			if err == nil {
				err = dw.Close()
			}
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrAuthFailed) {
				t.Errorf("%d bytes, %d of %d: %v", n, len(bad), len(ct), err)
			}
		}
	}
}

// The Wycheproof chunked-encryption vectors through every source.
func TestWycheproofChunkedSources(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	for _, file := range wpFiles {
		f := loadWycheproof(t, file.name)
		for _, g := range f.TestGroups {
			for _, v := range g.Tests {
				for _, im := range kernels.Available(file.aead) {
					keys, chunks, err := wpHeader(im, v.key, v.context, v.ct)
					if err != nil {
						continue // the header step: not the streams' business
					}
					valid := v.Result == "valid"
					for _, src := range sources {
						d := newDecryptReader(src.new(chunks, rng), keys, Info{}, 0)
						var out bytes.Buffer
						n, err := d.WriteTo(&out)
						switch {
						case valid && err != nil:
							t.Errorf("tc %d %s: %v", v.TcID, src.name, err)
						case !valid && !errors.Is(err, ErrAuthFailed) && !errors.Is(err, ErrTruncated):
							t.Errorf("tc %d %s: %v, want an authentication or truncation error", v.TcID, src.name, err)
						}
						if n != int64(out.Len()) {
							t.Errorf("tc %d %s: WriteTo reports %d of %d bytes", v.TcID, src.name, n, out.Len())
						}
						h := sha512.New()
						h.Write(out.Bytes())
						v.checkPlain(t, "WriteTo from "+src.name, n, h)
					}
				}
			}
		}
	}
}

// Streams allocate per stream, never per chunk, whatever the path.
func TestStreamPathsAllocationsPerChunk(t *testing.T) {
	if testing.Short() || underRace {
		t.Skip("allocation counts")
	}
	ctx := context.Background()
	s := newTestService(t, kernels.AES128GCM)
	out := make([]byte, 3*ChunkSize)
	paths := []struct {
		name string
		run  func(pt, ct []byte)
	}{
		{"seal Write", func(pt, _ []byte) {
			w, _ := s.EncryptWriter(ctx, "k", io.Discard, nil)
			w.Write(pt)
			w.Close()
		}},
		{"seal ReadFrom a bytes.Reader", func(pt, _ []byte) {
			w, _ := s.EncryptWriter(ctx, "k", io.Discard, nil)
			w.ReadFrom(bytes.NewReader(pt))
			w.Close()
		}},
		{"seal ReadFrom a plain reader", func(pt, _ []byte) {
			w, _ := s.EncryptWriter(ctx, "k", io.Discard, nil)
			w.ReadFrom(readOnly{bytes.NewReader(pt)})
			w.Close()
		}},
		{"open Write", func(_, ct []byte) {
			w := s.DecryptWriter(ctx, "k", io.Discard, nil)
			w.Write(ct)
			w.Close()
		}},
		{"open ReadFrom a plain reader", func(_, ct []byte) {
			w := s.DecryptWriter(ctx, "k", io.Discard, nil)
			w.ReadFrom(readOnly{bytes.NewReader(ct)})
			w.Close()
		}},
		{"open WriteTo from a bytes.Reader", func(_, ct []byte) {
			r, _ := s.DecryptReader(ctx, "k", bytes.NewReader(ct), nil)
			r.WriteTo(io.Discard)
		}},
		{"open WriteTo from a plain reader", func(_, ct []byte) {
			r, _ := s.DecryptReader(ctx, "k", readOnly{bytes.NewReader(ct)}, nil)
			r.WriteTo(io.Discard)
		}},
		{"open Read", func(_, ct []byte) {
			r, _ := s.DecryptReader(ctx, "k", bytes.NewReader(ct), nil)
			for {
				if _, err := r.Read(out); err != nil {
					break
				}
			}
		}},
	}
	sealed := func(n int) (pt, ct []byte) {
		pt = make([]byte, n)
		var buf bytes.Buffer
		w, _ := s.EncryptWriter(ctx, "k", &buf, nil)
		w.Write(pt)
		w.Close()
		return pt, buf.Bytes()
	}
	pt1, ct1 := sealed(64 * ChunkSize)
	pt2, ct2 := sealed(128 * ChunkSize)
	// No collection while counting: one would empty the sync.Pools that
	// streams take their buffers from, and the next stream would allocate
	// them anew, more often in the longer run, which takes longer.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	// AllocsPerRun counts every goroutine's allocations, and what another
	// goroutine of the test binary allocates meanwhile only adds: the
	// fewest of three counts is the stream's own.
	allocs := func(f func()) float64 {
		return min(testing.AllocsPerRun(5, f), testing.AllocsPerRun(5, f), testing.AllocsPerRun(5, f))
	}
	for _, p := range paths {
		a1 := allocs(func() { p.run(pt1, ct1) })
		a2 := allocs(func() { p.run(pt2, ct2) })
		if a1 != a2 {
			t.Errorf("%s: allocations grow with the stream: %v for 64 chunks, %v for 128", p.name, a1, a2)
		}
		t.Logf("%s: %v allocations per stream", p.name, a1)
	}
}

// readOnly hides every method of a reader but Read.
type readOnly struct{ r io.Reader }

func (r readOnly) Read(p []byte) (int, error) { return r.r.Read(p) }
