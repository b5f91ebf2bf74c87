package kernels

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// Known answers for the non-AEAD ciphers, which have no Wycheproof files here,
// run against every available implementation. (The AEADs are covered by
// wycheproof_test.go. IGE's public vectors are AES-128 only: TestIGEKnownAnswer
// runs them through newIGE, and TestBlockModeDefinition checks every AES-256-IGE
// implementation against the mode's definition.)

func unhex(s string) []byte {
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		panic(err)
	}
	return b
}

// sp80038aPlaintext is the four-block plaintext of NIST SP 800-38A, Appendix F.
var sp80038aPlaintext = unhex(`
	6bc1bee22e409f96e93d7e117393172a ae2d8a571e03ac9c9eb76fac45af8e51
	30c81c46a35ce411e5fbc1191a0a52ef f69f2445df4f9b17ad2b417be66c3710`)

var knownAnswers = []struct {
	name             string
	cipher           Cipher
	key, iv, in, out []byte // in encrypts to out, and out decrypts to in
}{
	{
		name:   "SP 800-38A F.2.1 CBC-AES128.Encrypt",
		cipher: AES128CBC,
		key:    unhex("2b7e151628aed2a6abf7158809cf4f3c"),
		iv:     unhex("000102030405060708090a0b0c0d0e0f"),
		in:     sp80038aPlaintext,
		out: unhex(`7649abac8119b246cee98e9b12e9197d 5086cb9b507219ee95db113a917678b2
			73bed6b8e3c1743b7116e69e22229516 3ff1caa1681fac09120eca307586e1a7`),
	},
	{
		name:   "SP 800-38A F.2.5 CBC-AES256.Encrypt",
		cipher: AES256CBC,
		key:    unhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4"),
		iv:     unhex("000102030405060708090a0b0c0d0e0f"),
		in:     sp80038aPlaintext,
		out: unhex(`f58c4c04d6e5f1ba779eabfb5f7bfbd6 9cfc4e967edb808d679f777bc6702c7d
			39f23369a9d9bacfa530e26304231461 b2eb05e2c39be9fcda6c19078c6a9d1b`),
	},
	{
		name:   "SP 800-38A F.5.1 CTR-AES128.Encrypt",
		cipher: AES128CTR,
		key:    unhex("2b7e151628aed2a6abf7158809cf4f3c"),
		iv:     unhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"),
		in:     sp80038aPlaintext,
		out: unhex(`874d6191b620e3261bef6864990db6ce 9806f66b7970fdff8617187bb9fffdff
			5ae4df3edbd5d35e5b4f09020db03eab 1e031dda2fbe03d1792170a0f3009cee`),
	},
	{
		name:   "SP 800-38A F.5.5 CTR-AES256.Encrypt",
		cipher: AES256CTR,
		key:    unhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4"),
		iv:     unhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"),
		in:     sp80038aPlaintext,
		out: unhex(`601ec313775789a5b7a7f504bbf3d228 f443e3ca4d62b59aca84e990cacaf5c5
			2b0930daa23de94ce87017ba2d84988d dfc9c58db67aada613c2dd08457941a6`),
	},
	{
		// The IV is OpenSSL's layout: block counter 1, little-endian, then
		// the RFC's nonce 00000000 0000004a 00000000.
		name:   "RFC 8439 2.4.2 ChaCha20 encryption",
		cipher: ChaCha20,
		key:    unhex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"),
		iv:     unhex("01000000 000000000000004a00000000"),
		in:     []byte("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it."),
		out: unhex(`6e2e359a2568f98041ba0728dd0d6981 e97e7aec1d4360c20a27afccfd9fae0b
			f91b65c5524733ab8f593dabcd62b357 1639d624e65152ab8f530c359f0861d8
			07ca0dbf500d6a6156a38e088a22b65e 52bc514d16ccf806818ce91ab7793736
			5af90bbf74a35be6b40b8eedf2785e42 874d`),
	},
}

func TestKnownAnswers(t *testing.T) {
	covered := map[Cipher]bool{}
	for _, v := range knownAnswers {
		covered[v.cipher] = true
		forEachImpl(t, v.cipher, func(t *testing.T, im *Implementation) {
			got := make([]byte, len(v.in))
			switch v.cipher.Kind() {
			case KindStream:
				mustStream(t, im, v.key, v.iv).XORKeyStream(got, v.in)
				if !bytes.Equal(got, v.out) {
					t.Errorf("%s: got %x, want %x", v.name, got, v.out)
				}
				mustStream(t, im, v.key, v.iv).XORKeyStream(got, v.out)
			case KindBlockMode:
				mustMode(t, im, v.key, v.iv, false).CryptBlocks(got, v.in)
				if !bytes.Equal(got, v.out) {
					t.Errorf("%s: got %x, want %x", v.name, got, v.out)
				}
				mustMode(t, im, v.key, v.iv, true).CryptBlocks(got, v.out)
			default:
				t.Fatalf("%s: no known-answer runner for kind %s", v.name, v.cipher.Kind())
			}
			if !bytes.Equal(got, v.in) {
				t.Errorf("%s, inverse: got %x, want %x", v.name, got, v.in)
			}
		})
	}
	for _, c := range Ciphers() {
		if c.Kind() != KindAEAD && c != AES256IGE && !covered[c] {
			t.Errorf("%s has no known-answer vector", c)
		}
	}
}
