package cryptosvc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/cipherd/cipherd/kernels"
)

// Tampering with sealed messages through the public API, in both modes and
// under every AEAD: every change must fail Open, DecryptReader and
// DecryptReaderAt alike, with the error its place in the format calls for,
// and a DecryptReader must yield only the plaintext of the chunks before the
// change, ending at a chunk boundary, then fail again on every read.

const tpKey = "tamper-key" // with versions 1, 2, 3; messages are under 3

var tpContext = []byte("tamper context")

// tpRegion is a span of a message's bytes with one role in the format.
type tpRegion struct {
	name       string
	start, end int
	chunk      int // the chunk's index, or -1 before the chunks
}

// tpMessage is a sealed message of two full chunks and a short final one,
// with its layout worked out from the format, not from the parser.
type tpMessage struct {
	name    string
	s       *Service
	ct, pt  []byte
	regions []tpRegion
	chunks  int // offset of chunk 0
	nchunks int
}

func tpService(t *testing.T, aead kernels.Cipher) *Service {
	t.Helper()
	s, err := New(Config{Keystore: NewMemStore(), AEAD: aead})
	if err != nil {
		t.Fatal(err)
	}
	var secrets []Secret
	for range 3 {
		sec, err := GenerateSecret(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, sec)
	}
	if _, err := s.ImportKey(context.Background(), tpKey, secrets, KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	return s
}

func tpRandom(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// tpSeal seals pt under key name in the given mode.
func tpSeal(t *testing.T, s *Service, name string, mode Mode, pt []byte) []byte {
	t.Helper()
	ctx := context.Background()
	if mode == ModeDirect {
		ct, _, err := s.Seal(ctx, name, pt, tpContext)
		if err != nil {
			t.Fatal(err)
		}
		return ct
	}
	var buf bytes.Buffer
	w, err := s.EncryptWriter(ctx, name, &buf, tpContext)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(pt); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func tpMessages(t *testing.T) []*tpMessage {
	var ms []*tpMessage
	for _, c := range SealAEADs {
		s := tpService(t, c)
		for _, mode := range []Mode{ModeDirect, ModeEnvelope} {
			m := &tpMessage{name: c.String() + "/" + mode.String(), s: s, pt: tpRandom(2*ChunkSize + 1000)}
			m.ct = tpSeal(t, s, tpKey, mode, m.pt)
			add := func(name string, n, chunk int) {
				start := 0
				if len(m.regions) > 0 {
					start = m.regions[len(m.regions)-1].end
				}
				m.regions = append(m.regions, tpRegion{name, start, start + n, chunk})
			}
			add("magic", 1, -1)
			add("format version", 1, -1)
			add("mode and AEAD", 1, -1)
			add("name length", 1, -1)
			add("key name", len(tpKey), -1)
			add("key version", 1, -1)
			if mode == ModeEnvelope {
				add("wrapped key salt", saltSize, -1)
				add("wrapped key commitment", commitmentSize, -1)
				add("wrapped key", c.KeySize(), -1)
				add("wrapped key tag", tagSize, -1)
			}
			add("salt", saltSize, -1)
			add("commitment", commitmentSize, -1)
			m.chunks = m.regions[len(m.regions)-1].end
			for i, rest := 0, len(m.pt); ; i++ {
				n := min(rest, ChunkSize)
				add(fmt.Sprintf("chunk %d", i), n, i)
				add(fmt.Sprintf("chunk %d tag", i), tagSize, i)
				rest -= n
				m.nchunks++
				if n < ChunkSize {
					break
				}
			}
			if end := m.regions[len(m.regions)-1].end; end != len(m.ct) {
				t.Fatalf("%s: layout of %d bytes, message of %d", m.name, end, len(m.ct))
			}
			ms = append(ms, m)
		}
	}
	return ms
}

// tpWant is how every decryption path must fail.
type tpWant struct {
	err      error
	stream   int // plaintext DecryptReader yields before failing; -1: DecryptReader fails
	readerAt int // plaintext ReadAt of everything yields before failing; -1: DecryptReaderAt fails
}

// mustFail opens bad three ways. DecryptReader reads readSize bytes at a
// time: above a chunk, it opens chunks straight into the caller's buffer.
func (m *tpMessage) mustFail(t *testing.T, what string, bad []byte, w tpWant, readSize int) {
	t.Helper()
	ctx := context.Background()
	if pt, _, err := m.s.Open(ctx, tpKey, bad, tpContext); !errors.Is(err, w.err) || pt != nil {
		t.Errorf("%s: Open: %d bytes, %v; want %v", what, len(pt), err, w.err)
	}

	d, err := m.s.DecryptReader(ctx, tpKey, bytes.NewReader(bad), tpContext)
	switch {
	case w.stream < 0:
		if !errors.Is(err, w.err) {
			t.Errorf("%s: DecryptReader: %v; want %v", what, err, w.err)
		}
	case err != nil:
		t.Errorf("%s: DecryptReader: %v; want it to fail while reading", what, err)
	default:
		buf := make([]byte, len(m.pt)+ChunkSize)
		n := 0
		var err error
		for err == nil {
			var k int
			k, err = d.Read(buf[n:min(len(buf), n+readSize)])
			n += k
		}
		if n != w.stream || n%ChunkSize != 0 || !errors.Is(err, w.err) || !bytes.Equal(buf[:n], m.pt[:n]) {
			t.Errorf("%s: DecryptReader (reads of %d): %d bytes (prefix %v), %v; want %d, %v",
				what, readSize, n, bytes.Equal(buf[:n], m.pt[:min(n, len(m.pt))]), err, w.stream, w.err)
		}
		// Nothing of the chunk that failed may show in the caller's buffer.
		if n < len(m.pt) {
			window := buf[n:min(n+readSize, n+ChunkSize, len(m.pt))]
			same := 0
			for i, b := range window {
				if b == m.pt[n+i] {
					same++
				}
			}
			if same > len(window)/8 {
				t.Errorf("%s: DecryptReader left %d of %d bytes of unauthenticated plaintext in the buffer", what, same, len(window))
			}
		}
		if k, err2 := d.Read(buf); k != 0 || err2 != err {
			t.Errorf("%s: DecryptReader: Read after failing: %d, %v; want 0, %v", what, k, err2, err)
		}
	}

	// DecryptWriter, fed in pieces of readSize: it writes the plaintext of
	// the chunks before the failure, as DecryptReader returns it, and fails
	// with the same error, from Write or from Close.
	var out bytes.Buffer
	dw := m.s.DecryptWriter(ctx, tpKey, &out, tpContext)
	var werr error
	for rest := bad; len(rest) > 0 && werr == nil; {
		k := min(len(rest), readSize)
		_, werr = dw.Write(rest[:k])
		rest = rest[k:]
	}
	if werr == nil {
		werr = dw.Close()
	}
	wantN := max(w.stream, 0)
	if !errors.Is(werr, w.err) || out.Len() != wantN || !bytes.Equal(out.Bytes(), m.pt[:wantN]) {
		t.Errorf("%s: DecryptWriter (writes of %d): %d bytes, %v; want %d, %v", what, readSize, out.Len(), werr, wantN, w.err)
	}
	if _, err2 := dw.Write([]byte{0}); err2 != werr {
		t.Errorf("%s: DecryptWriter: Write after failing: %v; want %v", what, err2, werr)
	}

	ra, err := m.s.DecryptReaderAt(ctx, tpKey, bytes.NewReader(bad), int64(len(bad)), tpContext)
	switch {
	case w.readerAt < 0:
		if !errors.Is(err, w.err) {
			t.Errorf("%s: DecryptReaderAt: %v; want %v", what, err, w.err)
		}
	case err != nil:
		t.Errorf("%s: DecryptReaderAt: %v; want it to fail while reading", what, err)
	default:
		p := make([]byte, ra.Size())
		n, err := ra.ReadAt(p, 0)
		if n != w.readerAt || !errors.Is(err, w.err) || !bytes.Equal(p[:n], m.pt[:n]) {
			t.Errorf("%s: ReadAt: %d bytes, %v; want %d, %v", what, n, err, w.readerAt, w.err)
		}
	}
}

// tpPositions returns the positions of a region to tamper with: all of a
// short one, else its first and last bytes and a sample between.
func tpPositions(r tpRegion) []int {
	if r.end-r.start <= 128 {
		ps := make([]int, 0, r.end-r.start)
		for i := r.start; i < r.end; i++ {
			ps = append(ps, i)
		}
		return ps
	}
	stride := 331
	if testing.Short() {
		stride = 1531
	}
	ps := []int{r.start}
	for i := r.start + 1 + stride/2; i < r.end-1; i += stride {
		ps = append(ps, i)
	}
	return append(ps, r.end-1)
}

// expect returns how a message with the bit at pos flipped must fail: a
// header that no longer parses, names another key, or names a version the
// key lacks fails as such; any other change fails to authenticate.
func (m *tpMessage) expect(r tpRegion, bad []byte, pos int) tpWant {
	header := func(err error) tpWant { return tpWant{err, -1, -1} }
	switch r.name {
	case "magic":
		return header(ErrMalformed)
	case "format version":
		return header(ErrUnsupported)
	case "mode and AEAD":
		if id, mode := bad[pos]&0x0f, bad[pos]>>4; id < 1 || id > 3 || mode > 1 {
			return header(ErrUnsupported)
		}
	case "name length":
		if int(bad[pos]) < len(tpKey) {
			return header(ErrKeyMismatch) // a shorter, valid name
		}
		return header(ErrMalformed) // the name takes in the key version, 0x03
	case "key name":
		if ValidateKeyName(string(bad[r.start:r.end])) == nil {
			return header(ErrKeyMismatch)
		}
		return header(ErrMalformed)
	case "key version":
		v, n := binary.Uvarint(bad[pos:])
		switch {
		case n <= 0 || v == 0 || v > 1<<32-1 || n != len(binary.AppendUvarint(nil, v)):
			return header(ErrMalformed)
		case v > 3:
			return header(ErrKeyNotFound)
		}
	}
	if r.chunk < 0 {
		return header(ErrAuthFailed)
	}
	w := tpWant{ErrAuthFailed, r.chunk * ChunkSize, r.chunk * ChunkSize}
	if r.chunk == m.nchunks-1 {
		w.readerAt = -1 // the final chunk is checked when the ReaderAt is made
	}
	return w
}

func TestTamperEveryRegion(t *testing.T) {
	for _, m := range tpMessages(t) {
		t.Run(m.name, func(t *testing.T) {
			for _, r := range m.regions {
				for i, pos := range tpPositions(r) {
					// Every bit of the bytes before the chunks, which fail
					// before any chunk is opened; one bit a byte after.
					bits := []byte{1 << (pos % 8)}
					if r.chunk < 0 {
						bits = []byte{1, 2, 4, 8, 16, 32, 64, 128}
					}
					for _, bit := range bits {
						bad := bytes.Clone(m.ct)
						bad[pos] ^= bit
						w := m.expect(r, bad, pos)
						readSize := len(m.pt) + ChunkSize
						if i%2 == 1 {
							readSize = 1000
						}
						m.mustFail(t, fmt.Sprintf("%s: byte %d ^ %#02x", r.name, pos, bit), bad, w, readSize)
						if errors.Is(w.err, ErrKeyMismatch) {
							// Asking for no key in particular finds none of that name.
							if _, _, err := m.s.Open(context.Background(), "", bad, tpContext); !errors.Is(err, ErrKeyNotFound) {
								t.Errorf("%s: byte %d: Open without a key name: %v; want %v", r.name, pos, err, ErrKeyNotFound)
							}
						}
					}
				}
			}
		})
	}
}

func TestTamperTruncate(t *testing.T) {
	for _, m := range tpMessages(t) {
		t.Run(m.name, func(t *testing.T) {
			var cuts []int
			for i := 0; i <= m.chunks; i++ {
				cuts = append(cuts, i) // every length up to the first chunk
			}
			for i := 0; i < m.nchunks; i++ {
				b := m.chunks + i*(ChunkSize+tagSize)
				cuts = append(cuts, b-1, b+1, b+tagSize-1, b+tagSize, b+tagSize+1, b+ChunkSize, b+ChunkSize+tagSize-1, b+ChunkSize+tagSize)
			}
			cuts = append(cuts, len(m.ct)-tagSize, len(m.ct)-1)
			cuts = slices.DeleteFunc(cuts, func(c int) bool { return c >= len(m.ct) })
			for _, cut := range cuts {
				what := fmt.Sprintf("cut to %d of %d bytes", cut, len(m.ct))
				if cut < m.chunks {
					m.mustFail(t, what, m.ct[:cut], tpWant{ErrTruncated, -1, -1}, ChunkSize+1)
					continue
				}
				// The chunks that fit whole open; what is left is a final
				// chunk too short for its tag, or one that fails.
				full, rest := (cut-m.chunks)/(ChunkSize+tagSize), (cut-m.chunks)%(ChunkSize+tagSize)
				w := tpWant{ErrAuthFailed, full * ChunkSize, -1}
				if rest < tagSize {
					w.err = ErrTruncated
				}
				m.mustFail(t, what, m.ct[:cut], w, 4096)
			}
		})
	}
}

func TestTamperChunkOrder(t *testing.T) {
	for _, m := range tpMessages(t) {
		t.Run(m.name, func(t *testing.T) {
			prefix := m.ct[:m.chunks]
			const sealed = ChunkSize + tagSize
			c := [][]byte{m.ct[m.chunks : m.chunks+sealed], m.ct[m.chunks+sealed : m.chunks+2*sealed], m.ct[m.chunks+2*sealed:]}
			for _, tc := range []struct {
				what   string
				chunks [][]byte
				want   tpWant
			}{
				{"chunks 0 and 1 swapped", [][]byte{c[1], c[0], c[2]}, tpWant{ErrAuthFailed, 0, 0}},
				{"chunk 0 in place of 1", [][]byte{c[0], c[0], c[2]}, tpWant{ErrAuthFailed, ChunkSize, ChunkSize}},
				{"chunk 1 dropped", [][]byte{c[0], c[2]}, tpWant{ErrAuthFailed, ChunkSize, -1}},
				{"chunk 0 dropped", [][]byte{c[1], c[2]}, tpWant{ErrAuthFailed, 0, -1}},
				{"final chunk moved before chunk 1", [][]byte{c[0], c[2], c[1]}, tpWant{ErrAuthFailed, ChunkSize, -1}},
				{"final chunk repeated", [][]byte{c[0], c[1], c[2], c[2]}, tpWant{ErrAuthFailed, 2 * ChunkSize, -1}},
				{"chunk 0 repeated at the end", [][]byte{c[0], c[1], c[2], c[0]}, tpWant{ErrAuthFailed, 2 * ChunkSize, -1}},
				{"one byte after the final chunk", [][]byte{c[0], c[1], c[2], {0}}, tpWant{ErrAuthFailed, 2 * ChunkSize, -1}},
				{"final chunk dropped", [][]byte{c[0], c[1]}, tpWant{ErrTruncated, 2 * ChunkSize, -1}},
			} {
				bad := bytes.Clone(prefix)
				for _, ch := range tc.chunks {
					bad = append(bad, ch...)
				}
				m.mustFail(t, tc.what, bad, tc.want, ChunkSize+1)
				m.mustFail(t, tc.what, bad, tc.want, 512)
			}
		})
	}
}

func TestTamperSplice(t *testing.T) {
	ctx := context.Background()
	for _, m := range tpMessages(t) {
		t.Run(m.name, func(t *testing.T) {
			// Another message of the same length under the same key version.
			other := &tpMessage{s: m.s, pt: tpRandom(len(m.pt))}
			h, n, err := ParseHeader(m.ct)
			if err != nil {
				t.Fatal(err)
			}
			other.ct = tpSeal(t, m.s, tpKey, h.Mode, other.pt)
			if h.Mode == ModeEnvelope {
				// The wrapped key is the other message's: its body does not
				// match it.
				m.mustFail(t, "header of one stream, body of another", tpJoin(m.ct[:n], other.ct[n:]), tpWant{ErrAuthFailed, -1, -1}, ChunkSize+1)
			} else {
				// A direct header holds nothing of its message: every message
				// of a key version and AEAD has the same one, so this splice
				// is the other message itself.
				if !bytes.Equal(m.ct[:n], other.ct[:n]) {
					t.Fatalf("direct headers differ")
				}
				if pt, _, err := m.s.Open(ctx, tpKey, tpJoin(m.ct[:n], other.ct[n:]), tpContext); err != nil || !bytes.Equal(pt, other.pt) {
					t.Fatalf("direct header of one message, body of another: %v", err)
				}
			}
			// Salt and commitment of one, chunks of the other.
			m.mustFail(t, "chunks of another message", tpJoin(m.ct[:m.chunks], other.ct[m.chunks:]), tpWant{ErrAuthFailed, 0, -1}, ChunkSize+1)
			// The first chunk of the other message.
			bad := bytes.Clone(m.ct)
			copy(bad[m.chunks:], other.ct[m.chunks:m.chunks+ChunkSize+tagSize])
			m.mustFail(t, "chunk 0 of another message", bad, tpWant{ErrAuthFailed, 0, 0}, ChunkSize+1)
		})
	}
}

func tpJoin(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// TestTamperRelabel moves a message to another key name, or another version,
// holding the same secret: the header names the key, so it must be bound to
// the body, whatever the key material.
func TestTamperRelabel(t *testing.T) {
	ctx := context.Background()
	for _, c := range SealAEADs {
		s, err := New(Config{Keystore: NewMemStore(), AEAD: c})
		if err != nil {
			t.Fatal(err)
		}
		sec, err := GenerateSecret(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"key-a", "key-b"} {
			if _, err := s.ImportKey(ctx, name, []Secret{sec, sec}, KeyConfig{}); err != nil {
				t.Fatal(err)
			}
		}
		for _, mode := range []Mode{ModeDirect, ModeEnvelope} {
			ct := tpSeal(t, s, "key-a", mode, []byte("relabel me"))
			h, n, err := ParseHeader(ct)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				what string
				f    func(*Header)
			}{
				{"key name", func(h *Header) { h.KeyName = "key-b" }},
				{"key version", func(h *Header) { h.KeyVersion = 1 }},
			} {
				h2 := h
				tc.f(&h2)
				hdr, err := h2.AppendBinary(nil)
				if err != nil {
					t.Fatal(err)
				}
				bad := tpJoin(hdr, ct[n:])
				if pt, _, err := s.Open(ctx, h2.KeyName, bad, tpContext); !errors.Is(err, ErrAuthFailed) {
					t.Errorf("%s/%s: %s relabelled to one with the same secret: Open: %q, %v; want %v", c, mode, tc.what, pt, err, ErrAuthFailed)
				}
				if _, err := s.DecryptReader(ctx, h2.KeyName, bytes.NewReader(bad), tpContext); !errors.Is(err, ErrAuthFailed) {
					t.Errorf("%s/%s: %s relabelled: DecryptReader: %v; want %v", c, mode, tc.what, err, ErrAuthFailed)
				}
			}
		}
	}
}

// TestDecryptReaderEmptyRead: an empty read returns 0 and no error while
// plaintext is pending, even when it is the final chunk's: io.EOF before it
// would cut the message short without an error.
func TestDecryptReaderEmptyRead(t *testing.T) {
	ctx := context.Background()
	s := tpService(t, kernels.AES256GCM)
	for _, n := range []int{1, 31, ChunkSize, ChunkSize + 31} {
		pt := tpRandom(n)
		ct := tpSeal(t, s, tpKey, ModeEnvelope, pt)
		d, err := s.DecryptReader(ctx, tpKey, bytes.NewReader(ct), tpContext)
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		p := make([]byte, 9)
		for {
			if k, err := d.Read(p[:0]); k != 0 || (err != nil && len(got) < n) {
				t.Fatalf("%d bytes: empty Read after %d: %d, %v", n, len(got), k, err)
			}
			k, err := d.Read(p)
			got = append(got, p[:k]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, pt) {
			t.Fatalf("%d bytes: read %d", n, len(got))
		}
	}
}
