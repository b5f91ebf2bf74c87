package cryptosvc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/cipherd/cipherd/kernels"
)

// sealRandomStream seals n bytes of random plaintext as a stream under key "k".
func sealRandomStream(t testing.TB, s *Service, n int, rng *rand.Rand, aad []byte) (pt, sealed []byte) {
	t.Helper()
	pt = make([]byte, n)
	for i := range pt {
		pt[i] = byte(rng.Uint32())
	}
	er, err := s.EncryptReader(context.Background(), "k", bytes.NewReader(pt), aad)
	if err != nil {
		t.Fatal(err)
	}
	if sealed, err = io.ReadAll(er); err != nil {
		t.Fatal(err)
	}
	return pt, sealed
}

// rangeInput is what a range decrypt of rg sends: the stream's start and
// the chunks RangeSpan names.
func rangeInput(t testing.TB, sealed []byte, rg Range) (in []byte, start int64, err error) {
	t.Helper()
	start, err = StreamStart(bytes.NewReader(sealed), int64(len(sealed)))
	if err != nil {
		t.Fatal(err)
	}
	from, to, _, err := RangeSpan(start, int64(len(sealed)), rg)
	if err != nil {
		return nil, start, err
	}
	in = append(bytes.Clone(sealed[:start]), sealed[from:to]...)
	return in, start, nil
}

// openRange decrypts rg from in, its size announced or not, and returns
// the plaintext and the first error, from DecryptRange or from reading.
func openRange(s *Service, in []byte, rg Range, sized bool, aad []byte) ([]byte, error) {
	size := int64(-1)
	if sized {
		size = int64(len(in))
	}
	rr, err := s.DecryptRange(context.Background(), "k", bytes.NewReader(in), size, rg, aad)
	if err != nil {
		return nil, err
	}
	got, err := io.ReadAll(rr)
	if err == nil && sized && int64(len(got)) != rr.Len() {
		return got, fmt.Errorf("read %d bytes, Len said %d", len(got), rr.Len())
	}
	return got, err
}

// wantRange is the plaintext of rg in pt, cut at its end.
func wantRange(pt []byte, rg Range) []byte {
	end := int64(len(pt))
	if rg.Len >= 0 {
		end = min(end, rg.Off+rg.Len)
	}
	return pt[rg.Off:end]
}

// Every range of every length around the chunk boundaries opens to exactly
// its plaintext, from the chunks RangeSpan names, with the input's size
// known (exact Len) and not.
func TestDecryptRange(t *testing.T) {
	s := newTestService(t, kernels.AES256GCM)
	rng := rand.New(rand.NewPCG(1, 2))
	aad := []byte("ctx")
	for _, n := range []int{1, 100, ChunkSize - 1, ChunkSize, ChunkSize + 1, 3 * ChunkSize, 3*ChunkSize + 777} {
		pt, sealed := sealRandomStream(t, s, n, rng, aad)
		offs := []int64{0, 1, ChunkSize - 1, ChunkSize, ChunkSize + 1, 2*ChunkSize + 5, int64(n) - 1}
		lens := []int64{-1, 1, 2, ChunkSize - 1, ChunkSize, ChunkSize + 1, 2 * ChunkSize, int64(n), 10 * ChunkSize}
		for _, off := range offs {
			if off < 0 || off >= int64(n) {
				continue
			}
			for _, l := range lens {
				rg := Range{Off: off, Len: l}
				in, start, err := rangeInput(t, sealed, rg)
				if err != nil {
					t.Fatalf("%d bytes, range %s: RangeSpan: %v", n, rg, err)
				}
				if max := start + int64(len(wantRange(pt, rg))) + 2*(ChunkSize+tagSize); int64(len(in)) > max {
					t.Fatalf("%d bytes, range %s: sends %d bytes, over %d", n, rg, len(in), max)
				}
				for _, sized := range []bool{true, false} {
					got, err := openRange(s, in, rg, sized, aad)
					if err != nil || !bytes.Equal(got, wantRange(pt, rg)) {
						t.Fatalf("%d bytes, range %s, sized %v: %d bytes (want %d), %v", n, rg, sized, len(got), len(wantRange(pt, rg)), err)
					}
				}
			}
		}
	}
}

// A range that starts at or past the end of the plaintext cannot be
// satisfied: RangeSpan says so, and so does DecryptRange from the final
// chunk.
func TestDecryptRangeNotSatisfiable(t *testing.T) {
	s := newTestService(t, kernels.AES256GCM)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 100, ChunkSize, 2*ChunkSize + 3} {
		_, sealed := sealRandomStream(t, s, n, rng, nil)
		for _, rg := range []Range{{Off: int64(n), Len: -1}, {Off: int64(n), Len: 1}, {Off: int64(n) + ChunkSize, Len: 5}} {
			if _, _, err := rangeInput(t, sealed, rg); !errors.Is(err, ErrRangeNotSatisfiable) {
				t.Errorf("%d bytes, range %s: RangeSpan: %v, want ErrRangeNotSatisfiable", n, rg, err)
			}
			// Sent the final chunk anyway, as the chunk the range starts in.
			start, _ := StreamStart(bytes.NewReader(sealed), int64(len(sealed)))
			last := (int64(len(sealed)) - start - 1) / (ChunkSize + tagSize)
			in := append(bytes.Clone(sealed[:start]), sealed[start+last*(ChunkSize+tagSize):]...)
			rg := Range{Off: last*ChunkSize + int64(n)%ChunkSize, Len: -1}
			for _, sized := range []bool{true, false} {
				if _, err := openRange(s, in, rg, sized, nil); !errors.Is(err, ErrRangeNotSatisfiable) {
					t.Errorf("%d bytes, range %s, sized %v: %v, want ErrRangeNotSatisfiable", n, rg, sized, err)
				}
			}
		}
	}
}

// Hostile inputs never yield plaintext that is not the range's: each fails
// with the error that says what is wrong, before any plaintext when the
// first chunk is the bad one, and otherwise before the bad chunk's.
func TestDecryptRangeHostile(t *testing.T) {
	s := newTestService(t, kernels.ChaCha20Poly1305)
	rng := rand.New(rand.NewPCG(5, 6))
	const full = ChunkSize + tagSize
	pt, sealed := sealRandomStream(t, s, 6*ChunkSize+1000, rng, nil)
	_, other := sealRandomStream(t, s, 6*ChunkSize+1000, rng, nil)
	start, err := StreamStart(bytes.NewReader(sealed), int64(len(sealed)))
	if err != nil {
		t.Fatal(err)
	}
	chunk := func(b []byte, i int64) []byte { return b[start+i*full : min(int64(len(b)), start+(i+1)*full)] }
	input := func(chunks ...[]byte) []byte {
		in := bytes.Clone(sealed[:start])
		for _, c := range chunks {
			in = append(in, c...)
		}
		return in
	}
	mid := Range{Off: 2*ChunkSize + 10, Len: 2 * ChunkSize} // chunks 2 to 4
	toEnd := Range{Off: 4*ChunkSize + 10, Len: -1}          // chunks 4 to 6 (final)
	cases := []struct {
		name string
		in   []byte
		rg   Range
		want error
		// sizedWant, when set, is the error with the input's size known,
		// which tells some of these from their lengths alone.
		sizedWant error
	}{
		{"chunks of another message", input(chunk(other, 2), chunk(other, 3), chunk(other, 4)), mid, ErrAuthFailed, nil},
		{"another message's later chunk", input(chunk(sealed, 2), chunk(sealed, 3), chunk(other, 4)), mid, ErrAuthFailed, nil},
		{"chunks from another offset", input(chunk(sealed, 3), chunk(sealed, 4), chunk(sealed, 5)), mid, ErrAuthFailed, nil},
		{"chunks reordered", input(chunk(sealed, 2), chunk(sealed, 4), chunk(sealed, 3)), mid, ErrAuthFailed, nil},
		{"a chunk missing", input(chunk(sealed, 2), chunk(sealed, 4)), mid, ErrAuthFailed, ErrTruncated},
		{"a chunk repeated", input(chunk(sealed, 2), chunk(sealed, 2), chunk(sealed, 4)), mid, ErrAuthFailed, nil},
		{"chunks short of the range", input(chunk(sealed, 2), chunk(sealed, 3)), mid, ErrTruncated, nil},
		{"a chunk past the range", input(chunk(sealed, 2), chunk(sealed, 3), chunk(sealed, 4), chunk(sealed, 5)), mid, ErrRangeMismatch, nil},
		{"the final chunk dropped", input(chunk(sealed, 4), chunk(sealed, 5)), toEnd, ErrTruncated, nil},
		{"a final chunk forged from a full one", input(chunk(sealed, 4), chunk(sealed, 5)[:full-1]), toEnd, ErrAuthFailed, nil},
		{"a final chunk forged, cut to its tag", input(chunk(sealed, 4), chunk(sealed, 5)[:tagSize]), toEnd, ErrAuthFailed, nil},
		{"the final chunk of another message", input(chunk(sealed, 4), chunk(sealed, 5), chunk(other, 6)), toEnd, ErrAuthFailed, nil},
		{"the final chunk cut", input(chunk(sealed, 4), chunk(sealed, 5), chunk(sealed, 6)[:100]), toEnd, ErrAuthFailed, nil},
		{"the final chunk's byte flipped", input(chunk(sealed, 4), chunk(sealed, 5), flip(chunk(sealed, 6), 7)), toEnd, ErrAuthFailed, nil},
		{"bytes after the final chunk", input(chunk(sealed, 4), chunk(sealed, 5), chunk(sealed, 6), []byte{0}), toEnd, ErrAuthFailed, nil},
		{"the wrong start for the range", input(chunk(sealed, 2), chunk(sealed, 3), chunk(sealed, 4)), Range{Off: 10, Len: 2 * ChunkSize}, ErrAuthFailed, nil},
	}
	for _, c := range cases {
		for _, sized := range []bool{true, false} {
			want := c.want
			if sized && c.sizedWant != nil {
				want = c.sizedWant
			}
			got, err := openRange(s, c.in, c.rg, sized, nil)
			if !errors.Is(err, want) {
				t.Errorf("%s, sized %v: %v, want %v", c.name, sized, err, want)
			}
			// Whatever came before the failure is the range's own.
			if !bytes.HasPrefix(wantRange(pt, c.rg), got) {
				t.Errorf("%s, sized %v: %d bytes of plaintext that are not the range's", c.name, sized, len(got))
			}
		}
	}
	// Another context: nothing opens.
	in, _, _ := rangeInput(t, sealed, mid)
	if _, err := openRange(s, in, mid, true, []byte("other")); !errors.Is(err, ErrAuthFailed) {
		t.Errorf("another context: %v, want ErrAuthFailed", err)
	}
}

func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 1
	return b
}

// The empty final chunk of a plaintext that fills its last chunk may be
// sent or not with a range that ends at the plaintext's end; with any other
// range it is a chunk too many.
func TestDecryptRangeEmptyFinalChunk(t *testing.T) {
	s := newTestService(t, kernels.AES128GCM)
	rng := rand.New(rand.NewPCG(7, 8))
	pt, sealed := sealRandomStream(t, s, 2*ChunkSize, rng, nil)
	start, _ := StreamStart(bytes.NewReader(sealed), int64(len(sealed)))
	const full = ChunkSize + tagSize
	rg := Range{Off: ChunkSize + 1, Len: ChunkSize - 1} // to the last byte
	for _, in := range [][]byte{sealed[:start+2*full], sealed} {
		in = append(bytes.Clone(sealed[:start]), in[start+full:]...)
		for _, sized := range []bool{true, false} {
			got, err := openRange(s, in, rg, sized, nil)
			if err != nil || !bytes.Equal(got, pt[ChunkSize+1:]) {
				t.Errorf("%d bytes sent, sized %v: %d bytes, %v", len(in), sized, len(got), err)
			}
		}
	}
	short := Range{Off: ChunkSize + 1, Len: 100}
	in := append(bytes.Clone(sealed[:start]), sealed[start+full:]...)
	for _, sized := range []bool{true, false} {
		if _, err := openRange(s, in, short, sized, nil); !errors.Is(err, ErrRangeMismatch) {
			t.Errorf("sized %v: %v, want ErrRangeMismatch", sized, err)
		}
	}
}

func TestParseRange(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Range
	}{
		{"0-0", Range{0, 1}},
		{"0-", Range{0, -1}},
		{"5-9", Range{5, 5}},
		{"7516192768-7517241343", Range{7 << 30, 1 << 20}},
		{"0-99999999999999999", Range{0, maxPlaintext}},
	} {
		got, err := ParseRange(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseRange(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
		if err == nil && c.want.Len != maxPlaintext && got.String() != c.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), c.in)
		}
	}
	for _, in := range []string{"", "-", "-5", "5", "9-5", "+1-2", "1-+2", " 1-2", "1-2 ", "1--2", "0x1-2", "1-2-3", "99999999999999999999-"} {
		if rg, err := ParseRange(in); err == nil {
			t.Errorf("ParseRange(%q) = %v, want an error", in, rg)
		}
	}
}
