package cryptosvc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Fuzz targets for the decoders and the streams. As plain tests they run
// their seeds; run each for real with, for example,
//
//	go test -run '^$' -fuzz '^FuzzOpen$' -fuzztime 1m -fuzzminimizetime 5s ./cryptosvc
//
// FuzzOpen's seeds include multi-chunk messages, which take the minimizer
// long to shrink: bound it, or a short run spends its time minimizing.

// fzSentinels are the errors decryption may return for any input.
var fzSentinels = []error{
	ErrAuthFailed, ErrTruncated, ErrMalformed, ErrUnsupported, ErrTooLarge,
	ErrKeyNotFound, ErrKeyMismatch, ErrVersionRetired,
}

func fzSentinel(err error) error {
	for _, s := range fzSentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return nil
}

func fzSecret(label string) Secret {
	b := sha256.Sum256([]byte("cipherd fuzz: " + label))
	s, _ := NewSecret(b[:])
	return s
}

// fzService returns a Service holding, with fixed secrets so that a corpus
// stays meaningful from run to run, a key pinned to each AEAD ("fz-" and the
// AEAD's name) with versions 1 to 3, of which 1 is retired; and the key of
// testdata/vectors.
func fzService(t testing.TB) *Service {
	t.Helper()
	ctx := context.Background()
	s, err := New(Config{Keystore: NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range SealAEADs {
		name := "fz-" + c.String()
		secrets := []Secret{fzSecret(name + "1"), fzSecret(name + "2"), fzSecret(name + "3")}
		if _, err := s.ImportKey(ctx, name, secrets, KeyConfig{AEAD: c.String(), MinDecryptionVersion: 2}); err != nil {
			t.Fatal(err)
		}
	}
	// The file with the most versions holds those of every other.
	b, err := os.ReadFile(filepath.Join(vecDir, "valid_keyversion_128.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v vecFile
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var secrets []Secret
	for _, h := range append([]string{v.SecretHex}, v.MoreSecretsHex...) {
		sec, err := NewSecret(vecDecodeHex(t, "secret", h))
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, sec)
	}
	if _, err := s.ImportKey(ctx, v.KeyName, secrets, KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	return s
}

// fzSeeds returns sealed messages under every fz key, and every vector's
// ciphertext with its context.
func fzSeeds(t testing.TB, s *Service) (cts, contexts [][]byte) {
	t.Helper()
	ctx := context.Background()
	for _, c := range SealAEADs {
		for _, n := range []int{0, 5, ChunkSize, ChunkSize + 3} {
			pt := bytes.Repeat([]byte{'p'}, n)
			name := "fz-" + c.String()
			ct, _, err := s.Seal(ctx, name, pt, []byte("fuzz"))
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			w, err := s.EncryptWriter(ctx, name, &buf, []byte("fuzz"))
			if err != nil {
				t.Fatal(err)
			}
			w.Write(pt)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			cts, contexts = append(cts, ct, buf.Bytes()), append(contexts, []byte("fuzz"), []byte("fuzz"))
		}
	}
	files, _ := filepath.Glob(filepath.Join(vecDir, "*.json"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var v vecFile
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		cts = append(cts, vecDecodeHex(t, "ciphertext", v.CiphertextHex))
		contexts = append(contexts, vecDecodeHex(t, "context", v.ContextHex))
	}
	return cts, contexts
}

// FuzzOpen gives arbitrary bytes to Open, DecryptReader and DecryptReaderAt:
// none may panic, every error is a sentinel, and the three agree.
func FuzzOpen(f *testing.F) {
	s := fzService(f)
	cts, contexts := fzSeeds(f, s)
	for i := range cts {
		f.Add(cts[i], contexts[i])
	}
	f.Add([]byte{}, []byte{})
	// A stream header whose key version overflows and which ends before its
	// wrapped key.
	f.Add([]byte{0xCD, 0x01, 0x12, 0x01, 'k', 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, []byte{})
	// A chunk that fails, then 14 bytes: too short for a final chunk.
	one, _, err := s.Seal(context.Background(), "fz-aes-128-gcm", make([]byte, ChunkSize+3), []byte("fuzz"))
	if err != nil {
		f.Fatal(err)
	}
	_, n, _ := ParseHeader(one)
	bad := bytes.Clone(one[:n+chunkedPrefix+ChunkSize+tagSize+14])
	bad[n+chunkedPrefix] ^= 1
	f.Add(bad, []byte("fuzz"))
	f.Fuzz(func(t *testing.T, ct, msgContext []byte) {
		ctx := context.Background()
		pt, _, err := s.Open(ctx, "", ct, msgContext)
		want := fzSentinel(err)
		if err != nil && want == nil {
			t.Fatalf("Open: %v is not a sentinel", err)
		}

		var spt []byte
		d, serr := s.DecryptReader(ctx, "", bytes.NewReader(ct), msgContext)
		if serr == nil {
			spt, serr = io.ReadAll(d)
			if k, err2 := d.Read(make([]byte, 1)); k != 0 || (serr == nil && err2 != io.EOF) || (serr != nil && err2 != serr) {
				t.Fatalf("DecryptReader: Read after the end: %d, %v (first %v)", k, err2, serr)
			}
		}
		var rpt []byte
		ra, rerr := s.DecryptReaderAt(ctx, "", bytes.NewReader(ct), int64(len(ct)), msgContext)
		if rerr == nil {
			if ra.Size() < 0 || ra.Size() > int64(len(ct)) {
				t.Fatalf("ReaderAt: size %d of a %d-byte message", ra.Size(), len(ct))
			}
			rpt = make([]byte, ra.Size())
			var n int
			n, rerr = ra.ReadAt(rpt, 0)
			rpt = rpt[:n]
		}

		for how, e := range map[string]error{"DecryptReader": serr, "DecryptReaderAt": rerr} {
			got := fzSentinel(e)
			switch {
			case e != nil && got == nil:
				t.Fatalf("%s: %v is not a sentinel", how, e)
			case (e == nil) != (err == nil):
				t.Fatalf("Open: %v; %s: %v", err, how, e)
			case got == want:
			case got == ErrTruncated && want == ErrAuthFailed && how == "DecryptReaderAt":
				// A body whose length no message has, with a chunk that
				// fails before its end: the sequential paths meet the chunk
				// first, random access the length.
			default:
				t.Fatalf("Open: %v; %s: %v", err, how, e)
			}
		}
		if err == nil && (!bytes.Equal(spt, pt) || !bytes.Equal(rpt, pt)) {
			t.Fatalf("the three paths opened different plaintexts")
		}
	})
}

// FuzzHeader: a header ParseHeader accepts re-encodes to the same bytes, and
// ReadHeader reads exactly it and agrees; one ParseHeader rejects, ReadHeader
// rejects too.
func FuzzHeader(f *testing.F) {
	s := fzService(f)
	cts, _ := fzSeeds(f, s)
	for _, ct := range cts {
		f.Add(ct[:min(len(ct), maxHeaderSize+8)])
	}
	for _, h := range []string{"", "cd", "cd0112", "cd01120100", "cd0102016b00", "cd0102016b8100", "cd0102016bffffffff0f", "cd0102016b8080808010", "cd0102016b808080808001", "cd0103806b01"} {
		b, _ := hex.DecodeString(h)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := ParseHeader(b)
		r := bytes.NewReader(b)
		rh, raw, rerr := ReadHeader(r)
		if err != nil {
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("ParseHeader: %v is not a sentinel", err)
			}
			if rerr == nil {
				t.Fatalf("ReadHeader accepted what ParseHeader rejects (%v)", err)
			}
			return
		}
		if n <= 0 || n > len(b) || n > maxHeaderSize {
			t.Fatalf("ParseHeader: length %d of %d", n, len(b))
		}
		enc, err := h.AppendBinary(nil)
		if err != nil {
			t.Fatalf("AppendBinary of a parsed header: %v", err)
		}
		if !bytes.Equal(enc, b[:n]) {
			t.Fatalf("re-encoded to %x, was %x", enc, b[:n])
		}
		if rerr != nil {
			t.Fatalf("ReadHeader: %v", rerr)
		}
		if !reflect.DeepEqual(rh, h) || !bytes.Equal(raw, b[:n]) {
			t.Fatalf("ReadHeader: %+v %x; ParseHeader: %+v %x", rh, raw, h, b[:n])
		}
		if r.Len() != len(b)-n {
			t.Fatalf("ReadHeader read %d bytes of a %d-byte header", len(b)-r.Len(), n)
		}
		// The header holds no reference to b.
		if len(h.WrappedKey) > 0 {
			b[n-1] ^= 0xff
			if h.WrappedKey[len(h.WrappedKey)-1] == b[n-1] {
				t.Fatalf("the wrapped key aliases the input")
			}
		}
	})
}

// FuzzRoundTrip seals random plaintexts every way, writing and reading in
// random pieces, and checks every way of opening gives them back.
func FuzzRoundTrip(f *testing.F) {
	s := fzService(f)
	for i, n := range []uint32{0, 1, 100, ChunkSize - 1, ChunkSize, ChunkSize + 1, 2 * ChunkSize, 2*ChunkSize + 777, 3*ChunkSize + 99} {
		f.Add(uint64(i), n, uint8(i*7), uint8(i), uint16(i*4099), uint16(i*5003))
	}
	f.Add(uint64(99), uint32(2*ChunkSize), uint8(0), uint8(1), uint16(ChunkSize), uint16(ChunkSize))
	f.Add(uint64(98), uint32(3*ChunkSize), uint8(3), uint8(2), uint16(65535), uint16(1))
	f.Fuzz(func(t *testing.T, seed uint64, ptLen uint32, ctxLen uint8, aead uint8, maxWrite, maxRead uint16) {
		ctx := context.Background()
		rng := rand.New(rand.NewPCG(seed, uint64(ptLen)))
		pt := make([]byte, int(ptLen%(3*ChunkSize+100)))
		for i := range pt {
			pt[i] = byte(rng.Uint32())
		}
		msgContext := make([]byte, ctxLen)
		for i := range msgContext {
			msgContext[i] = byte(rng.Uint32())
		}
		name := "fz-" + SealAEADs[int(aead)%len(SealAEADs)].String()
		// piece returns the size of the next write or read: 0 to max+1, so
		// that some are empty and the others progress.
		piece := func(max uint16) int { return rng.IntN(int(max) + 2) }

		one, _, err := s.Seal(ctx, name, pt, msgContext)
		if err != nil {
			t.Fatal(err)
		}

		// The stream, pushed in random writes or through ReadFrom.
		var buf bytes.Buffer
		w, err := s.EncryptWriter(ctx, name, &buf, msgContext)
		if err != nil {
			t.Fatal(err)
		}
		if seed&1 == 0 {
			for rest := pt; len(rest) > 0; {
				k := min(piece(maxWrite), len(rest))
				if n, err := w.Write(rest[:k]); n != k || err != nil {
					t.Fatalf("Write: %d of %d, %v", n, k, err)
				}
				rest = rest[k:]
			}
		} else if n, err := w.ReadFrom(&fzPieces{pt, piece, maxWrite}); n != int64(len(pt)) || err != nil {
			t.Fatalf("ReadFrom: %d of %d, %v", n, len(pt), err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		stream := buf.Bytes()

		// The same stream pulled from EncryptReader in random reads.
		er, err := s.EncryptReader(ctx, name, &fzPieces{pt, piece, maxWrite}, msgContext)
		if err != nil {
			t.Fatal(err)
		}
		pulled, err := fzReadAll(er, piece, maxRead)
		if err != nil {
			t.Fatalf("EncryptReader: %v", err)
		}

		_, hn, _ := ParseHeader(one)
		_, sn, _ := ParseHeader(stream)
		if int64(len(one)) != int64(hn+chunkedPrefix)+chunkedLen(int64(len(pt))) || len(stream)-sn != len(one)-hn || len(pulled) != len(stream) {
			t.Fatalf("lengths: one-shot %d, stream %d, pulled %d, for %d bytes", len(one), len(stream), len(pulled), len(pt))
		}

		for _, m := range []struct {
			what string
			ct   []byte
		}{{"one-shot", one}, {"stream", stream}, {"pulled stream", pulled}} {
			if got, _, err := s.Open(ctx, name, m.ct, msgContext); err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("%s: Open: %v", m.what, err)
			}
			d, err := s.DecryptReader(ctx, name, bytes.NewReader(m.ct), msgContext)
			if err != nil {
				t.Fatalf("%s: DecryptReader: %v", m.what, err)
			}
			var got []byte
			if seed&2 == 0 {
				got, err = fzReadAll(d, piece, maxRead)
			} else {
				var out bytes.Buffer
				_, err = d.WriteTo(&out)
				got = out.Bytes()
			}
			if err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("%s: DecryptReader: %d of %d bytes, %v", m.what, len(got), len(pt), err)
			}
			ra, err := s.DecryptReaderAt(ctx, name, bytes.NewReader(m.ct), int64(len(m.ct)), msgContext)
			if err != nil || ra.Size() != int64(len(pt)) {
				t.Fatalf("%s: DecryptReaderAt: %v", m.what, err)
			}
			for range 6 {
				off := rng.IntN(len(pt) + 1)
				p := make([]byte, rng.IntN(len(pt)+2-off))
				end := min(off+len(p), len(pt))
				n, err := ra.ReadAt(p, int64(off))
				if n != end-off || !bytes.Equal(p[:n], pt[off:end]) || (end-off < len(p)) != (err == io.EOF) || (err != nil && err != io.EOF) {
					t.Fatalf("%s: ReadAt(%d bytes at %d) of %d: %d, %v", m.what, len(p), off, len(pt), n, err)
				}
			}
		}
	})
}

// fzPieces is a reader of b that returns pieces of random sizes (at least one
// byte, so that it always progresses).
type fzPieces struct {
	b     []byte
	piece func(uint16) int
	max   uint16
}

func (r *fzPieces) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), max(1, r.piece(r.max)))], r.b)
	r.b = r.b[k:]
	return k, nil
}

// fzReadAll reads r to its end in reads of random sizes (some empty).
func fzReadAll(r io.Reader, piece func(uint16) int, maxRead uint16) ([]byte, error) {
	var out []byte
	p := make([]byte, int(maxRead)+1)
	for stalls := 0; ; {
		k := piece(maxRead)
		n, err := r.Read(p[:k])
		out = append(out, p[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if n == 0 && k > 0 {
			if stalls++; stalls > 100 {
				return out, fmt.Errorf("no progress after %d bytes", len(out))
			}
		}
	}
}
