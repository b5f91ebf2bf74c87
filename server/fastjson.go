package server

import (
	"encoding/base64"
	"strconv"

	"github.com/cipherd/cipherd/api"
)

// A fast path for the commonest JSON bodies: one item of base64 fields, and
// its one result. decodeItem accepts a strict subset of what encoding/json
// accepts and, for that subset, yields exactly what it would; anything else
// (escapes, nulls, other fields, batches, duplicate or differently cased
// names, bad base64) returns ok = false and goes the general way, which
// also produces the error messages. FuzzDecodeItem holds it to that.

// decodeItem parses {"<data>": b64, "context": b64, "reference": string}
// with every field optional, in any order. A present base64 field decodes to
// a non-nil slice, as encoding/json does: into scratch while it has room, so
// that the results may alias scratch (but not b or each other).
func decodeItem(b []byte, dataField string, scratch []byte) (data, context []byte, reference string, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, nil, "", false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil, nil, "", skipSpace(b, i+1) == len(b)
	}
	var seenData, seenContext, seenRef bool
	for {
		name, j, okName := plainString(b, i)
		if !okName {
			return nil, nil, "", false
		}
		j = skipSpace(b, j)
		if j >= len(b) || b[j] != ':' {
			return nil, nil, "", false
		}
		val, k, okVal := plainString(b, skipSpace(b, j+1))
		if !okVal {
			return nil, nil, "", false
		}
		switch {
		case string(name) == dataField && !seenData:
			seenData = true
			if data, ok = decodeBase64(val, &scratch); !ok {
				return nil, nil, "", false
			}
		case string(name) == "context" && !seenContext:
			seenContext = true
			if context, ok = decodeBase64(val, &scratch); !ok {
				return nil, nil, "", false
			}
		case string(name) == "reference" && !seenRef:
			seenRef = true
			for _, ch := range val {
				if ch < 0x20 || ch > 0x7e { // not plain ASCII: let encoding/json check it
					return nil, nil, "", false
				}
			}
			reference = string(val)
		default:
			return nil, nil, "", false
		}
		k = skipSpace(b, k)
		if k >= len(b) {
			return nil, nil, "", false
		}
		switch b[k] {
		case ',':
			i = skipSpace(b, k+1)
		case '}':
			return data, context, reference, skipSpace(b, k+1) == len(b)
		default:
			return nil, nil, "", false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads a JSON string at b[i] that has no escapes and no control
// characters, and returns its contents and the index after its closing quote.
func plainString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch ch := b[j]; {
		case ch == '"':
			return b[i+1 : j], j + 1, true
		case ch == '\\' || ch < 0x20:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// decodeBase64 decodes s into the front of *scratch, which it then advances,
// or into a new slice when *scratch is nil or too short.
func decodeBase64(s []byte, scratch *[]byte) ([]byte, bool) {
	var out []byte
	if n := base64.StdEncoding.DecodedLen(len(s)); *scratch != nil && n <= len(*scratch) {
		out, *scratch = (*scratch)[:n:n], (*scratch)[n:]
	} else {
		out = make([]byte, n)
	}
	n, err := base64.StdEncoding.Decode(out, s)
	return out[:n], err == nil
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
// each omitted when empty, as their omitempty tags say: the base64 data under
// dataName, key_version, aead (which needs no escaping).
func appendResult(b []byte, dataName string, data []byte, version uint32, aead string) []byte {
	b = append(b, '{')
	if len(data) > 0 {
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
		if ch := s[i]; ch < 0x20 || ch > 0x7e || ch == '"' || ch == '\\' || ch == '<' || ch == '>' || ch == '&' {
			return false
		}
	}
	return true
}
