package cryptosvc

import (
	"bytes"
	"compress/zlib"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cipherd/cipherd/kernels"
)

// The Wycheproof vectors for c2sp.org/chunked-encryption (testdata/wycheproof,
// see SOURCE and LICENSE) exercise the body of the sealed format: the input
// key is the vector's key itself, the ciphertext is salt || commitment ||
// chunks. Each vector runs three ways, as each of the package's decryption
// paths would meet it: one shot (openChunks), streaming (DecryptReader) and
// random access (ReaderAt).

// wpFile is a Wycheproof c2sp_chunked_encryption test file.
type wpFile struct {
	Algorithm     string `json:"algorithm"`
	NumberOfTests int    `json:"numberOfTests"`
	Notes         map[string]struct {
		BugType     string `json:"bugType"`
		Description string `json:"description"`
	} `json:"notes"`
	TestGroups []struct {
		Type  string     `json:"type"`
		AEAD  string     `json:"aead"`
		SHA   string     `json:"sha"`
		Tests []wpVector `json:"tests"`
	} `json:"testGroups"`
}

type wpVector struct {
	TcID      int      `json:"tcId"`
	Comment   string   `json:"comment"`
	Key       string   `json:"key"`
	Ctx       string   `json:"ctx"`
	CT        string   `json:"ct"` // zlib-compressed, then hex
	AEADKey   string   `json:"aeadKey"`
	BaseNonce string   `json:"baseNonce"`
	MsgLength *int64   `json:"msgLength"` // of the plaintext, or of the valid prefix (PartialPlaintext)
	MsgSha512 string   `json:"msgSha512"`
	Result    string   `json:"result"`
	Flags     []string `json:"flags"`

	key, context, ct []byte // decoded
}

func (v *wpVector) has(flag string) bool { return slices.Contains(v.Flags, flag) }

// wantLen is the length of the plaintext a streaming reader may produce:
// the whole message, the valid prefix, or nothing.
func (v *wpVector) wantLen() int64 {
	if v.MsgLength == nil {
		return 0
	}
	return *v.MsgLength
}

// checkPlain checks n bytes of output hashed into h against the vector.
func (v *wpVector) checkPlain(t *testing.T, how string, n int64, h hash.Hash) {
	t.Helper()
	if n != v.wantLen() {
		t.Errorf("%s: %d bytes of plaintext, want %d", how, n, v.wantLen())
		return
	}
	if v.MsgLength != nil && hex.EncodeToString(h.Sum(nil)) != v.MsgSha512 {
		t.Errorf("%s: plaintext SHA-512 mismatch", how)
	}
}

// wpFiles lists the vector files with the least number of vectors of each
// flag they hold ("valid" counts valid vectors), so that none is skipped
// unnoticed.
var wpFiles = []struct {
	name  string
	aead  kernels.Cipher
	flags map[string]int
}{
	{"c2sp_chunked_encryption_aes_128_gcm_test.json", kernels.AES128GCM, wpFlagCounts},
	{"c2sp_chunked_encryption_aes_256_gcm_test.json", kernels.AES256GCM, wpFlagCounts},
}

var wpFlagCounts = map[string]int{
	"valid":              10,
	"CounterRollover":    2,
	"ModifiedCiphertext": 7,
	"PartialPlaintext":   9,
	"ValidFinalChunk":    4,
	"Truncation":         9,
	"TrailingData":       3,
	"HeaderFailure":      10,
	"WrongKey":           1,
	"WrongContext":       1,
	"InvalidKeySize":     2,
	"ChunkReordering":    2,
}

func loadWycheproof(t *testing.T, name string) *wpFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "wycheproof", name))
	if err != nil {
		t.Fatal(err)
	}
	var f wpFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for gi := range f.TestGroups {
		for vi := range f.TestGroups[gi].Tests {
			v := &f.TestGroups[gi].Tests[vi]
			z, err := hex.DecodeString(v.CT)
			if err != nil {
				t.Fatalf("tc %d: ct: %v", v.TcID, err)
			}
			zr, err := zlib.NewReader(bytes.NewReader(z))
			if err != nil {
				t.Fatalf("tc %d: ct: %v", v.TcID, err)
			}
			if v.ct, err = io.ReadAll(zr); err != nil {
				t.Fatalf("tc %d: ct: %v", v.TcID, err)
			}
			if v.key, err = hex.DecodeString(v.Key); err != nil {
				t.Fatalf("tc %d: key: %v", v.TcID, err)
			}
			if v.context, err = hex.DecodeString(v.Ctx); err != nil {
				t.Fatalf("tc %d: ctx: %v", v.TcID, err)
			}
		}
	}
	return &f
}

func TestWycheproofChunked(t *testing.T) {
	for _, file := range wpFiles {
		t.Run(file.aead.String(), func(t *testing.T) {
			f := loadWycheproof(t, file.name)
			seen := map[string]int{}
			total := 0
			for _, g := range f.TestGroups {
				if g.Type != "ChunkedEncryption" || g.AEAD != ianaName(file.aead) || g.SHA != "SHA-512" {
					t.Fatalf("group %s %s %s: not for this instantiation", g.Type, g.AEAD, g.SHA)
				}
				for i := range g.Tests {
					v := &g.Tests[i]
					total++
					switch v.Result {
					case "valid":
						seen["valid"]++
						if len(v.Flags) > 0 && !slices.Equal(v.Flags, []string{"CounterRollover"}) {
							t.Fatalf("tc %d: valid vector with flags %v", v.TcID, v.Flags)
						}
					case "invalid":
					default:
						t.Fatalf("tc %d: result %q", v.TcID, v.Result)
					}
					for _, fl := range v.Flags {
						if _, ok := f.Notes[fl]; !ok {
							t.Fatalf("tc %d: flag %s has no note", v.TcID, fl)
						}
						if _, ok := wpFlagCounts[fl]; !ok {
							t.Fatalf("tc %d: flag %s is not handled by this test", v.TcID, fl)
						}
						seen[fl]++
					}
					for _, im := range kernels.Available(file.aead) {
						t.Run(fmt.Sprintf("tc%d/%s", v.TcID, im.Name()), func(t *testing.T) { runWycheproofVector(t, im, v) })
					}
				}
			}
			if total != f.NumberOfTests {
				t.Errorf("ran %d vectors, the file declares %d", total, f.NumberOfTests)
			}
			for fl, want := range file.flags {
				if seen[fl] < want {
					t.Errorf("flag %s: %d vectors, want at least %d", fl, seen[fl], want)
				}
			}
		})
	}
}

// wpHeader is the header step of every decryption path: the length check,
// the key derivation and the commitment check. It returns the chunks.
func wpHeader(im *kernels.Implementation, key, context, ct []byte) (*chunkedKeys, []byte, error) {
	if len(ct) < chunkedPrefix {
		return nil, nil, ErrTruncated
	}
	keys, commitment, err := deriveChunked(im, newPRK(key), ct[:saltSize], context)
	if err != nil {
		return nil, nil, err
	}
	if err := checkCommitment(ct[saltSize:chunkedPrefix], &commitment); err != nil {
		return nil, nil, err
	}
	return keys, ct[chunkedPrefix:], nil
}

func runWycheproofVector(t *testing.T, im *kernels.Implementation, v *wpVector) {
	t.Logf("tc %d: %s %v", v.TcID, v.Comment, v.Flags)
	valid := v.Result == "valid"
	c := im.Cipher()

	// The derivation, against the vector's key and base nonce where given.
	if v.AEADKey != "" && len(v.ct) >= saltSize {
		out := make([]byte, c.KeySize()+chunkNonceSize+commitmentSize)
		newPRK(v.key).expand(out, []byte(chunkedInfoLabel), []byte(ianaName(c)), []byte{0}, v.ct[:saltSize], v.context)
		if got := hex.EncodeToString(out[:c.KeySize()]); got != v.AEADKey {
			t.Errorf("derived key %s, want %s", got, v.AEADKey)
		}
		if got := hex.EncodeToString(out[c.KeySize() : c.KeySize()+chunkNonceSize]); got != v.BaseNonce {
			t.Errorf("derived base nonce %s, want %s", got, v.BaseNonce)
		}
	}

	keys, chunks, err := wpHeader(im, v.key, v.context, v.ct)
	if v.has("HeaderFailure") {
		var want error
		switch {
		case v.has("Truncation"):
			want = ErrTruncated
		case v.has("WrongKey"), v.has("WrongContext"), v.has("ModifiedCiphertext"):
			want = ErrAuthFailed
		}
		switch {
		case err == nil:
			t.Fatalf("header step accepted a vector that must fail there")
		case want != nil && !errors.Is(err, want):
			t.Fatalf("header step: %v, want %v", err, want)
		}
		return
	}
	if err != nil {
		t.Fatalf("header step: %v", err)
	}

	// One shot.
	pt, err := keys.openChunks(nil, chunks)
	switch {
	case valid && err != nil:
		t.Errorf("one shot: %v", err)
	case valid:
		h := sha512.New()
		h.Write(pt)
		v.checkPlain(t, "one shot", int64(len(pt)), h)
	case err == nil:
		t.Errorf("one shot: invalid vector opened")
	case !errors.Is(err, ErrAuthFailed) && !errors.Is(err, ErrTruncated):
		t.Errorf("one shot: %v, want an authentication or truncation error", err)
	case pt != nil:
		t.Errorf("one shot: returned %d bytes with the error", len(pt))
	}

	// Streaming, with reads smaller than a chunk (through the reader's
	// buffer), larger than a chunk (straight into the caller's buffer), and
	// WriteTo.
	for _, how := range []string{"small reads", "large reads", "WriteTo"} {
		d := newDecryptReader(bytes.NewReader(chunks), keys, Info{}, 0)
		h := sha512.New()
		var n int64
		var err error
		if how == "WriteTo" {
			n, err = d.WriteTo(h)
			if valid && err == nil {
				err = io.EOF
			}
		} else {
			size := 4093
			if how == "large reads" {
				size = 3*ChunkSize + 7
			}
			buf := make([]byte, size)
			for err == nil {
				var k int
				k, err = d.Read(buf)
				h.Write(buf[:k])
				n += int64(k)
			}
		}
		switch {
		case valid && err != io.EOF:
			t.Errorf("stream, %s: %v", how, err)
		case !valid && (err == io.EOF || !errors.Is(err, ErrAuthFailed) && !errors.Is(err, ErrTruncated)):
			t.Errorf("stream, %s: %v, want an authentication or truncation error", how, err)
		}
		v.checkPlain(t, "stream, "+how, n, h)
		// The end, or the error, is sticky.
		if k, err2 := d.Read(make([]byte, ChunkSize+1)); k != 0 || err2 != err {
			t.Errorf("stream, %s: Read after the end: %d, %v; want 0, %v", how, k, err2, err)
		}
		if k, err2 := d.WriteTo(io.Discard); k != 0 || (valid && err2 != nil) || (!valid && err2 != err) {
			t.Errorf("stream, %s: WriteTo after the end: %d, %v", how, k, err2)
		}
	}

	// Pushed through a DecryptWriter in pieces of 5000 bytes.
	{
		h := sha512.New()
		cw := &countWriter{w: h}
		dw := newDecryptWriter(cw, keys, Info{})
		var err error
		for rest := chunks; len(rest) > 0 && err == nil; {
			k := min(len(rest), 5000)
			_, err = dw.Write(rest[:k])
			rest = rest[k:]
		}
		if err == nil {
			err = dw.Close()
		}
		switch {
		case valid && err != nil:
			t.Errorf("DecryptWriter: %v", err)
		case !valid && (err == nil || !errors.Is(err, ErrAuthFailed) && !errors.Is(err, ErrTruncated)):
			t.Errorf("DecryptWriter: %v, want an authentication or truncation error", err)
		}
		v.checkPlain(t, "DecryptWriter", cw.n, h)
	}

	// Random access.
	ra, err := newReaderAt(bytes.NewReader(v.ct), chunkedPrefix, int64(len(v.ct)), keys, Info{})
	switch {
	case valid && err != nil:
		t.Fatalf("ReaderAt: %v", err)
	case !valid && err != nil:
		if !errors.Is(err, ErrAuthFailed) && !errors.Is(err, ErrTruncated) {
			t.Errorf("ReaderAt: %v, want an authentication or truncation error", err)
		}
		return
	case !valid && !v.has("ValidFinalChunk"):
		t.Fatalf("ReaderAt: accepted an invalid vector whose final chunk is not valid")
	}
	p := make([]byte, ra.Size())
	n, err := ra.ReadAt(p, 0)
	h := sha512.New()
	h.Write(p[:n])
	v.checkPlain(t, "ReadAt", int64(n), h)
	if !valid {
		if !errors.Is(err, ErrAuthFailed) {
			t.Errorf("ReadAt: %v, want %v", err, ErrAuthFailed)
		}
		return
	}
	if err != nil || ra.Size() != *v.MsgLength {
		t.Fatalf("ReadAt: %d bytes of %d, %v", n, ra.Size(), err)
	}
	if k, err := ra.ReadAt(make([]byte, 1), ra.Size()); k != 0 || err != io.EOF {
		t.Errorf("ReadAt at the end: %d, %v; want 0, EOF", k, err)
	}
	// A range across the first chunk boundary and one in the last chunk.
	for _, r := range [][2]int64{{ChunkSize - 3, ChunkSize + 5}, {ra.Size() - ra.Size()%ChunkSize, ra.Size()}} {
		if r[1] > ra.Size() {
			continue
		}
		q := make([]byte, r[1]-r[0])
		if k, err := ra.ReadAt(q, r[0]); k != len(q) || err != nil || !bytes.Equal(q, p[r[0]:r[1]]) {
			t.Errorf("ReadAt [%d, %d): %d, %v", r[0], r[1], k, err)
		}
	}
}

// countWriter counts what passes through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.w.Write(p)
}
