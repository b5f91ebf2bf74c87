package cryptosvc_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/kernels"
)

// An independent decoder of envelope-mode messages, written from
// docs/FORMAT.md (Encrypted message format, Chunked encryption) with the
// standard library's primitives only, opens what a LocalSealer seals, from
// the data key alone; and a message key alone opens its message's chunks.
func TestLocalSealIndependentDecoder(t *testing.T) {
	ctx := context.Background()
	for _, c := range cryptosvc.SealAEADs {
		s, err := cryptosvc.New(cryptosvc.Config{Keystore: cryptosvc.NewMemStore(), AEAD: c})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateKey(ctx, "orders", cryptosvc.KeyConfig{}); err != nil {
			t.Fatal(err)
		}
		sk, err := s.NewSealingKey(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		l, err := cryptosvc.NewLocalSealer(sk)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, 5, 16384, 40000} {
			pt := bytes.Repeat([]byte{byte(n)}, n)
			ct, err := l.Seal(nil, pt, []byte("ctx"))
			if err != nil {
				t.Fatal(err)
			}
			h := refHeaderLen(t, ct)
			got, err := refChunkedDecrypt(c, sk.DataKey, ct[h:], []byte("ctx"))
			if err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("%s, %d bytes: the reference decoder: %v", c, n, err)
			}
			if _, err := refChunkedDecrypt(c, sk.DataKey, ct[h:], []byte("other")); err == nil {
				t.Fatalf("%s: the reference decoder opened it under another context", c)
			}
			mk, err := s.MessageKey(ctx, "orders", ct[:h+56], []byte("ctx"))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := refOpenChunks(c, mk.Key, mk.Nonce[:], ct[h+56:]); err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("%s, %d bytes: the reference chunk opener with the message key: %v", c, n, err)
			}
		}
	}
}

// refHeaderLen: magic, version, mode|AEAD, name length, name, minimal
// uvarint version, and in envelope mode the wrapped data key (88 bytes for
// AEAD 1, 104 for 2 and 3).
func refHeaderLen(t *testing.T, m []byte) int {
	t.Helper()
	if m[0] != 0xCD || m[1] != 0x01 || m[2]>>4 != 1 {
		t.Fatalf("not an envelope-mode message: % x", m[:3])
	}
	n := 4 + int(m[3])
	_, u := binary.Uvarint(m[n:])
	w := 104
	if m[2]&15 == 1 {
		w = 88
	}
	return n + u + w
}

func refAEAD(c kernels.Cipher, key []byte) cipher.AEAD {
	if c == kernels.ChaCha20Poly1305 {
		a, _ := chacha20poly1305.New(key)
		return a
	}
	b, _ := aes.NewCipher(key)
	a, _ := cipher.NewGCM(b)
	return a
}

var refIANA = map[kernels.Cipher]string{kernels.AES128GCM: "AEAD_AES_128_GCM", kernels.AES256GCM: "AEAD_AES_256_GCM", kernels.ChaCha20Poly1305: "AEAD_CHACHA20_POLY1305"}

// refChunkedDecrypt is ChunkedDecrypt as FORMAT.md states it.
func refChunkedDecrypt(c kernels.Cipher, input, body, context []byte) ([]byte, error) {
	if len(body) < 56 {
		return nil, errors.New("truncated")
	}
	info := append([]byte("c2sp.org/chunked-encryption@v1+"+refIANA[c]+"\x00"), body[:24]...)
	info = append(info, context...)
	out, err := hkdf.Expand(sha512.New, input, string(info), c.KeySize()+12+32)
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare(out[c.KeySize()+12:], body[24:56]) != 1 {
		return nil, errors.New("commitment")
	}
	return refOpenChunks(c, out[:c.KeySize()], out[c.KeySize():c.KeySize()+12], body[56:])
}

// refOpenChunks opens chunks of 16400 bytes, the last shorter, chunk i
// under the base nonce XOR i.
func refOpenChunks(c kernels.Cipher, key, base, chunks []byte) ([]byte, error) {
	a := refAEAD(c, key)
	var pt []byte
	for i := uint64(0); ; i++ {
		chunk := chunks[:min(len(chunks), 16400)]
		nonce := bytes.Clone(base)
		var ib [8]byte
		binary.BigEndian.PutUint64(ib[:], i)
		for j := range 8 {
			nonce[4+j] ^= ib[j]
		}
		p, err := a.Open(nil, nonce, chunk, nil)
		if err != nil {
			return nil, err
		}
		pt = append(pt, p...)
		chunks = chunks[len(chunk):]
		if len(chunk) < 16400 {
			return pt, nil
		}
	}
}
