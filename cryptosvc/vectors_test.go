package cryptosvc

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The vectors of our own format (testdata/vectors) are written by
// internal/vectorgen, one file per case named after what it breaks. Each is
// opened with Open, DecryptReader and DecryptReaderAt, which must agree.

// vecFile is one vector file; see internal/vectorgen for the fields.
type vecFile struct {
	Name                 string   `json:"name"`
	Description          string   `json:"description"`
	SecretHex            string   `json:"secret_hex"`
	MoreSecretsHex       []string `json:"more_secrets_hex"`
	MinDecryptionVersion uint32   `json:"min_decryption_version"`
	KeyName              string   `json:"key_name"`
	ContextHex           string   `json:"context_hex"`
	CiphertextHex        string   `json:"ciphertext_hex"`
	Result               string   `json:"result"`
	Error                string   `json:"error"`
	PlaintextHex         *string  `json:"plaintext_hex"`
	PlaintextSHA512      string   `json:"plaintext_sha512"`
	AEAD                 string   `json:"aead"`
	Mode                 string   `json:"mode"`
	KeyVersion           uint32   `json:"key_version"`
}

// vecErrors maps a vector's error to the sentinel every API must return.
var vecErrors = map[string]error{
	"auth":            ErrAuthFailed,
	"truncated":       ErrTruncated,
	"malformed":       ErrMalformed,
	"unsupported":     ErrUnsupported,
	"key_not_found":   ErrKeyNotFound,
	"key_mismatch":    ErrKeyMismatch,
	"version_retired": ErrVersionRetired,
}

const vecDir = "testdata/vectors"

func vecDecodeHex(t testing.TB, field, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("%s: %v", field, err)
	}
	return b
}

func TestVectors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(vecDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 70 {
		t.Fatalf("%d vector files in %s, want at least 70 (go run ./internal/vectorgen -out %s)", len(files), vecDir, vecDir)
	}
	results := map[string]int{}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var v vecFile
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if want := strings.TrimSuffix(filepath.Base(file), ".json"); v.Name != want {
			t.Fatalf("%s: name %q", file, v.Name)
		}
		results[v.Result+" "+v.Error]++
		t.Run(v.Name, func(t *testing.T) { runVector(t, &v) })
	}
	// Every outcome is represented.
	for _, want := range []string{"valid "} {
		if results[want] < 10 {
			t.Errorf("%d %q vectors", results[want], want)
		}
	}
	for kind := range vecErrors {
		if results["invalid "+kind] == 0 {
			t.Errorf("no invalid vector with error %s", kind)
		}
	}
}

func runVector(t *testing.T, v *vecFile) {
	t.Log(v.Description)
	ctx := context.Background()
	var secrets []Secret
	for i, h := range append([]string{v.SecretHex}, v.MoreSecretsHex...) {
		s, err := NewSecret(vecDecodeHex(t, "secret", h))
		if err != nil {
			t.Fatalf("secret %d: %v", i+1, err)
		}
		secrets = append(secrets, s)
	}
	s, err := New(Config{Keystore: NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ImportKey(ctx, v.KeyName, secrets, KeyConfig{MinDecryptionVersion: v.MinDecryptionVersion}); err != nil {
		t.Fatal(err)
	}
	ct := vecDecodeHex(t, "ciphertext", v.CiphertextHex)
	context := vecDecodeHex(t, "context", v.ContextHex)

	var check func(how string, pt []byte, info Info, err error)
	switch v.Result {
	case "valid":
		if v.Error != "" || (v.PlaintextHex == nil) == (v.PlaintextSHA512 == "") {
			t.Fatalf("valid vector with error %q, or not exactly one of plaintext_hex and plaintext_sha512", v.Error)
		}
		check = func(how string, pt []byte, info Info, err error) {
			t.Helper()
			if err != nil {
				t.Errorf("%s: %v", how, err)
				return
			}
			if v.PlaintextHex != nil {
				if got := hex.EncodeToString(pt); got != *v.PlaintextHex {
					t.Errorf("%s: plaintext %s, want %s", how, got, *v.PlaintextHex)
				}
			} else if sum := sha512.Sum512(pt); hex.EncodeToString(sum[:]) != v.PlaintextSHA512 {
				t.Errorf("%s: plaintext of %d bytes, SHA-512 mismatch", how, len(pt))
			}
			if info.Key != v.KeyName || info.Version != v.KeyVersion || info.AEAD.String() != v.AEAD || info.Mode.String() != v.Mode {
				t.Errorf("%s: info %+v (%s, %s), want %s v%d %s %s", how, info, info.AEAD, info.Mode, v.KeyName, v.KeyVersion, v.AEAD, v.Mode)
			}
		}
	case "invalid":
		want, ok := vecErrors[v.Error]
		if !ok {
			t.Fatalf("unknown error %q", v.Error)
		}
		check = func(how string, pt []byte, _ Info, err error) {
			t.Helper()
			switch {
			case err == nil:
				t.Errorf("%s: opened, to %d bytes; want %v", how, len(pt), want)
			case !errors.Is(err, want):
				t.Errorf("%s: %v; want %v", how, err, want)
			}
		}
	default:
		t.Fatalf("result %q", v.Result)
	}

	pt, info, err := s.Open(ctx, v.KeyName, ct, context)
	check("Open", pt, info, err)

	if d, err := s.DecryptReader(ctx, v.KeyName, bytes.NewReader(ct), context); err != nil {
		check("DecryptReader", nil, Info{}, err)
	} else {
		pt, err := io.ReadAll(d)
		if err != nil && v.Result == "invalid" {
			pt = nil // a streamed prefix is not a result
		}
		check("DecryptReader", pt, d.Info(), err)
	}

	if ra, err := s.DecryptReaderAt(ctx, v.KeyName, bytes.NewReader(ct), int64(len(ct)), context); err != nil {
		check("DecryptReaderAt", nil, Info{}, err)
	} else {
		pt := make([]byte, ra.Size())
		n, err := ra.ReadAt(pt, 0)
		check("DecryptReaderAt", pt[:n], ra.Info(), err)
	}
}

// TestVectorsWorkedExamples checks the worked examples of docs/FORMAT.md
// against their vectors, which TestVectors opens.
func TestVectorsWorkedExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "FORMAT.md"))
	if err != nil {
		t.Skip("no docs/FORMAT.md:", err)
	}
	flat := strings.Join(strings.Fields(string(doc)), "")
	for name, pieces := range map[string][][2]int{
		"worked_example_direct_aes256gcm":   {{0, -1}},                       // the whole message
		"worked_example_envelope_aes128gcm": {{0, -1}},                       // the whole message
		"worked_example_rewrapped":          {{35, 67}, {67, 99}, {99, 103}}, // wrap commitment, wrapped key, body start
	} {
		b, err := os.ReadFile(filepath.Join(vecDir, name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var v vecFile
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		ct := vecDecodeHex(t, "ciphertext", v.CiphertextHex)
		for _, p := range pieces {
			end := p[1]
			if end < 0 {
				end = len(ct)
			}
			if h := hex.EncodeToString(ct[p[0]:end]); !strings.Contains(flat, h) {
				t.Errorf("%s: bytes %d to %d (%s) are not in docs/FORMAT.md", name, p[0], end, h)
			}
		}
	}
}

// TestVectorsRegenerate checks that the generator reproduces testdata/vectors
// byte for byte, so that the files are what the generator says they are.
func TestVectorsRegenerate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs internal/vectorgen")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	out := t.TempDir()
	cmd := exec.Command(gobin, "run", "./internal/vectorgen", "-out", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./internal/vectorgen: %v\n%s", err, b)
	}
	want, _ := filepath.Glob(filepath.Join(vecDir, "*.json"))
	got, _ := filepath.Glob(filepath.Join(out, "*.json"))
	names := map[string]bool{}
	for _, f := range got {
		names[filepath.Base(f)] = true
	}
	for _, f := range want {
		if !names[filepath.Base(f)] {
			t.Errorf("%s: not made by the generator (a renamed or removed case?)", f)
		}
		delete(names, filepath.Base(f))
	}
	for n := range names {
		t.Errorf("%s: made by the generator, missing from %s", n, vecDir)
	}
	for _, f := range want {
		a, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(out, filepath.Base(f)))
		if err != nil {
			continue // reported above
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from what the generator makes now: run go run ./internal/vectorgen -out %s", f, vecDir)
		}
	}
}
