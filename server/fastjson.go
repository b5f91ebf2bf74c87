package server

import (
	"encoding/base64"
	"strconv"

	"github.com/cipherd/cipherd/api"
)

// The fast encoders of the commonest JSON results: one item's result,
// written as encoding/json would write it, straight into the response's
// buffer. The data routes' request bodies are decoded in
// fastjson_request.go; batch results are written in batch.go.

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// appendEncryptResult appends r as encoding/json would marshal it, or
// reports false for the results it leaves to encoding/json (errors, and
// references, which may need escaping).
func appendEncryptResult(b []byte, r *api.EncryptResult) ([]byte, bool) {
	if r.Error != nil || r.Reference != "" || !plainASCII(r.AEAD) {
		return b, false
	}
	return appendResult(b, "ciphertext", r.Ciphertext, r.KeyVersion, r.AEAD), true
}

// appendDecryptResult is appendEncryptResult for a decryption.
func appendDecryptResult(b []byte, r *api.DecryptResult) ([]byte, bool) {
	if r.Error != nil || r.Reference != "" {
		return b, false
	}
	return appendResult(b, "plaintext", r.Plaintext, r.KeyVersion, ""), true
}

// appendResult writes the fields the two results share, in their order and
// each omitted as their tags say: the base64 data under dataName when it is
// not nil (an empty message is ""), key_version and aead (which needs no
// escaping) when not empty.
func appendResult(b []byte, dataName string, data []byte, version uint32, aead string) []byte {
	b = append(b, '{')
	if data != nil {
		b = append(append(append(b, '"'), dataName...), `":"`...)
		b = append(base64.StdEncoding.AppendEncode(b, data), '"')
	}
	if version != 0 {
		b = strconv.AppendUint(append(comma(b), `"key_version":`...), uint64(version), 10)
	}
	if aead != "" {
		b = append(append(append(comma(b), `"aead":"`...), aead...), '"')
	}
	return append(b, '}')
}

// comma separates a field from the one before it, if any.
func comma(b []byte) []byte {
	if b[len(b)-1] != '{' {
		return append(b, ',')
	}
	return b
}

// plainASCII reports whether s needs no escaping in JSON (encoding/json also
// escapes <, > and &).
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if !jsonPlain[s[i]] {
			return false
		}
	}
	return true
}

// jsonPlain[c] holds for the bytes plainASCII lets through: one load per
// byte instead of seven comparisons, for the strings every audit record
// and response carries (valgrind --tool=callgrind of
// BenchmarkHandleEncryptJSON).
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c <= 0x7e; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()
