package server

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/api"
)

// The fast encoders write what encoding/json writes, or decline.
func checkAppendResults(t *testing.T, data []byte, version uint32, aead, ref string) {
	t.Helper()
	er := api.EncryptResult{Ciphertext: data, KeyVersion: version, AEAD: aead, Reference: ref}
	if got, ok := appendEncryptResult(nil, &er); ok {
		want, _ := json.Marshal(&er)
		if !bytes.Equal(got, want) {
			t.Fatalf("encrypt result %+v:\n got %s\nwant %s", er, got, want)
		}
	} else if ref == "" && plainASCII(aead) {
		t.Fatalf("encrypt result %+v: the fast encoder declined a plain result", er)
	}
	dr := api.DecryptResult{Plaintext: data, KeyVersion: version, Reference: ref}
	if got, ok := appendDecryptResult(nil, &dr); ok {
		want, _ := json.Marshal(&dr)
		if !bytes.Equal(got, want) {
			t.Fatalf("decrypt result %+v:\n got %s\nwant %s", dr, got, want)
		}
	} else if ref == "" {
		t.Fatalf("decrypt result %+v: the fast encoder declined a plain result", dr)
	}
}

func TestAppendResults(t *testing.T) {
	for _, data := range [][]byte{nil, {}, {0}, []byte("hello, world"), bytes.Repeat([]byte{0xff}, 100)} {
		for _, v := range []uint32{0, 1, 4294967295} {
			for _, aead := range []string{"", "aes-256-gcm", "a<b", "é"} {
				for _, ref := range []string{"", "r"} {
					checkAppendResults(t, data, v, aead, ref)
				}
			}
		}
	}
	if _, ok := appendEncryptResult(nil, &api.EncryptResult{Error: &api.Error{Code: api.CodeBadRequest}}); ok {
		t.Error("the fast encoder took an error result")
	}
}

func FuzzAppendResults(f *testing.F) {
	f.Add([]byte("x"), uint32(1), "aes-128-gcm", "")
	f.Fuzz(checkAppendResults)
}

// plainASCII lets a byte through only when encoding/json writes it as it
// is, and lets every printable ASCII byte through but " \ < > &.
func TestPlainASCIIBytes(t *testing.T) {
	for c := 0; c < 256; c++ {
		s := string([]byte{byte(c)})
		q, _ := json.Marshal(s)
		printable := c >= 0x20 && c <= 0x7e && !strings.ContainsRune(`"\<>&`, rune(c))
		if got := plainASCII(s); got != printable || got && string(q) != `"`+s+`"` {
			t.Errorf("byte %#x: plainASCII %v, encoding/json %s", c, got, q)
		}
	}
	if !plainASCII("3f9c0d1e2a4b5c6d7e8f9a0b") || plainASCII("a\"b") || plainASCII("") != true {
		t.Error("plainASCII of whole strings")
	}
}
