package pgstore

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"strings"

	"github.com/cipherd/cipherd/cryptosvc"
)

// materialForms returns every text form in which s's material could leak:
// raw, base64 in four alphabets, hex in two cases.
func materialForms(s *cryptosvc.Secret) [][]byte {
	b := s.Expose()
	forms := [][]byte{bytes.Clone(b)}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		forms = append(forms, []byte(enc.EncodeToString(b)[:40]))
	}
	h := hex.EncodeToString(b)
	return append(forms, []byte(h), []byte(strings.ToUpper(h)))
}
