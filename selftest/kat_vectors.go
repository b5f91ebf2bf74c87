// Known-answer vectors, each named after its source, and the checks that run them.

package selftest

import (
	"bytes"
	"crypto/cipher"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strings"
	"sync"

	//lint:ignore SA1019 Poly1305 itself is what the KAT checks: it is the code x/crypto's chacha20poly1305 runs.
	"golang.org/x/crypto/poly1305"

	"github.com/cipherd/cipherd/kernels"
)

// katDstPrefix is placed in dst before Seal, which must append after it.
var katDstPrefix = []byte("cipherd")

// katAEADVector is one AEAD known answer; Open of ciphertext‖tag must return
// plaintext.
type katAEADVector struct {
	key, nonce, plaintext, aad, ciphertext, tag []byte
}

func (v katAEADVector) check(t katTarget) error {
	a, err := t.newAEAD(v.key)
	if err != nil {
		return fmt.Errorf("NewAEAD: %w", err)
	}
	return v.checkAEAD(a)
}

func (v katAEADVector) checkAEAD(a cipher.AEAD) error {
	if a.NonceSize() != len(v.nonce) || a.Overhead() != len(v.tag) {
		return fmt.Errorf("AEAD has nonce size %d and overhead %d, want %d and %d", a.NonceSize(), a.Overhead(), len(v.nonce), len(v.tag))
	}
	sealedWant := slices.Concat(v.ciphertext, v.tag)

	dst := make([]byte, len(katDstPrefix), len(katDstPrefix)+len(sealedWant))
	copy(dst, katDstPrefix)
	sealed := a.Seal(dst, v.nonce, v.plaintext, v.aad)
	if len(sealed) < len(dst) || !bytes.Equal(sealed[:len(dst)], katDstPrefix) {
		return errors.New("Seal did not append to dst")
	}
	if err := katCompare("Seal", sealed[len(dst):], sealedWant); err != nil {
		return err
	}

	opened, err := a.Open(nil, v.nonce, sealedWant, v.aad)
	if err != nil {
		return fmt.Errorf("Open rejected the known ciphertext: %w", err)
	}
	if err := katCompare("Open", opened, v.plaintext); err != nil {
		return err
	}

	tampered := bytes.Clone(sealedWant)
	tampered[len(tampered)-1] ^= 0x80
	if _, err := a.Open(nil, v.nonce, tampered, v.aad); err == nil {
		return errors.New("Open accepted the known ciphertext with one tag bit flipped")
	}
	if len(v.ciphertext) > 0 {
		tampered := bytes.Clone(sealedWant)
		tampered[0] ^= 0x01
		if _, err := a.Open(nil, v.nonce, tampered, v.aad); err == nil {
			return errors.New("Open accepted the known ciphertext with one ciphertext bit flipped")
		}
	}
	return nil
}

// katChunks are the sizes of the first pieces streams are fed in, in place;
// the rest goes in one call. Their sum, 64, is a block boundary for AES and
// ChaCha20 alike, but none of the pieces is.
var katChunks = []int{1, 15, 17, 31}

// katStreamVector is one stream-cipher known answer.
type katStreamVector struct {
	key, iv, plaintext, ciphertext []byte
}

func (v katStreamVector) check(t katTarget) error {
	s, err := t.newStream(v.key, v.iv)
	if err != nil {
		return fmt.Errorf("NewStream: %w", err)
	}
	out := make([]byte, len(v.plaintext))
	s.XORKeyStream(out, v.plaintext)
	if err := katCompare("encrypt", out, v.ciphertext); err != nil {
		return err
	}

	if s, err = t.newStream(v.key, v.iv); err != nil {
		return fmt.Errorf("NewStream: %w", err)
	}
	buf := bytes.Clone(v.ciphertext)
	rest := buf
	for _, n := range katChunks {
		n = min(n, len(rest))
		s.XORKeyStream(rest[:n], rest[:n])
		rest = rest[n:]
	}
	s.XORKeyStream(rest, rest)
	return katCompare("decrypt in place, in pieces", buf, v.plaintext)
}

// katBlockVector is one block-mode known answer (whole blocks only).
type katBlockVector struct {
	key, iv, plaintext, ciphertext []byte
}

func (v katBlockVector) check(t katTarget) error {
	enc, err := t.newMode(v.key, v.iv, false)
	if err != nil {
		return fmt.Errorf("NewEncrypter: %w", err)
	}
	if enc.BlockSize() != 16 {
		return fmt.Errorf("block size %d, want 16", enc.BlockSize())
	}
	out := make([]byte, len(v.plaintext))
	enc.CryptBlocks(out, v.plaintext)
	if err := katCompare("encrypt", out, v.ciphertext); err != nil {
		return err
	}

	dec, err := t.newMode(v.key, v.iv, true)
	if err != nil {
		return fmt.Errorf("NewDecrypter: %w", err)
	}
	buf := bytes.Clone(v.ciphertext)
	dec.CryptBlocks(buf[:16], buf[:16]) // the chaining state must carry to the next call
	dec.CryptBlocks(buf[16:], buf[16:])
	return katCompare("decrypt in place, in pieces", buf, v.plaintext)
}

// katPoly1305Vector is one Poly1305 known answer.
type katPoly1305Vector struct {
	key      [32]byte
	msg, tag []byte
}

func (v katPoly1305Vector) check(p katPrims) error {
	var tag [16]byte
	p.poly1305(&tag, v.msg, &v.key)
	if err := katCompare("Poly1305", tag[:], v.tag); err != nil {
		return err
	}
	bad := tag
	bad[0] ^= 0x01
	if poly1305.Verify(&bad, v.msg, &v.key) {
		return errors.New("Poly1305 verified a tag with one bit flipped")
	}
	return nil
}

// katHKDFVector is one HKDF known answer; prk is nil when the source gives
// only the output.
type katHKDFVector struct {
	hash                      func() hash.Hash
	ikm, salt, info, prk, okm []byte
}

func (v katHKDFVector) check(p katPrims) error {
	if v.prk != nil {
		prk, err := p.hkdfExtract(v.hash, v.ikm, v.salt)
		if err != nil {
			return fmt.Errorf("HKDF-Extract: %w", err)
		}
		if err := katCompare("HKDF-Extract", prk, v.prk); err != nil {
			return err
		}
		okm, err := p.hkdfExpand(v.hash, v.prk, string(v.info), len(v.okm))
		if err != nil {
			return fmt.Errorf("HKDF-Expand: %w", err)
		}
		if err := katCompare("HKDF-Expand", okm, v.okm); err != nil {
			return err
		}
	}
	okm, err := p.hkdfKey(v.hash, v.ikm, v.salt, string(v.info), len(v.okm))
	if err != nil {
		return fmt.Errorf("HKDF: %w", err)
	}
	return katCompare("HKDF", okm, v.okm)
}

// katHex decodes hex written in any grouping: spaces and colons are ignored.
// It panics on malformed input, which the tests would catch at once.
func katHex(parts ...string) []byte {
	s := strings.NewReplacer(" ", "", ":", "").Replace(strings.Join(parts, ""))
	b, err := hex.DecodeString(s)
	if err != nil {
		panic("selftest: bad KAT hex: " + err.Error())
	}
	return b
}

// katChaChaIV builds the 16-byte IV kernels' ChaCha20 takes, OpenSSL's layout:
// the initial block counter, little-endian, then the RFC 8439 nonce.
func katChaChaIV(counter uint32, nonce []byte) []byte {
	return append(binary.LittleEndian.AppendUint32(nil, counter), nonce...)
}

// Inputs shared by several vectors.
const (
	// RFC 8439 §2.4.2, §2.8.2 and draft-irtf-cfrg-xchacha §A.3.1.
	katSunscreen = "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it."
	// RFC 8439 §A.2 test vector #2.
	katIETFContribution = "Any submission to the IETF intended by the Contributor for publication as all or part of an IETF Internet-Draft or RFC and any statement made within the context of an IETF activity is considered an \"IETF Contribution\". Such statements include oral statements in IETF sessions, as well as written and electronic communications made at any time or place, which are addressed to"
	// RFC 8439 §A.2 test vector #3.
	katJabberwocky = "'Twas brillig, and the slithy toves\nDid gyre and gimble in the wabe:\nAll mimsy were the borogoves,\nAnd the mome raths outgrabe."
	// RFC 8439 §A.5 (the quotation marks are U+201C and U+201D, as in the RFC).
	katInternetDrafts = "Internet-Drafts are draft documents valid for a maximum of six months and may be updated, replaced, or obsoleted by other documents at any time. It is inappropriate to use Internet-Drafts as reference material or to cite them other than as /\u201cwork in progress./\u201d"
)

// NIST SP 800-38A Appendix F: the AES-128 and AES-256 keys and the four-block
// plaintext shared by its ECB, CBC and CTR examples.
var (
	katSP80038AKey128 = katHex("2b7e1516 28aed2a6 abf71588 09cf4f3c")
	katSP80038AKey256 = katHex("603deb10 15ca71be 2b73aef0 857d7781 1f352c07 3b6108d7 2d9810a3 0914dff4")
	katSP80038APlain  = katHex(
		"6bc1bee2 2e409f96 e93d7e11 7393172a",
		"ae2d8a57 1e03ac9c 9eb76fac 45af8e51",
		"30c81c46 a35ce411 e5fbc119 1a0a52ef",
		"f69f2445 df4f9b17 ad2b417b e66c3710")
)

// AES-256-IGE has no published test vector. These two are derived from
// published AES-256 known answers, so that they rest on standards alone.
//
// IGE computes cᵢ = E(pᵢ ⊕ cᵢ₋₁) ⊕ pᵢ₋₁, with c₀ and p₀ the two halves of the
// 32-byte IV. Given any AES-256 known answer E(X) = Y, pick pᵢ = X ⊕ cᵢ₋₁: the
// block cipher then sees exactly X, so cᵢ = Y ⊕ pᵢ₋₁. Decryption,
// pᵢ = D(cᵢ ⊕ pᵢ₋₁) ⊕ cᵢ₋₁, sees cᵢ ⊕ pᵢ₋₁ = Y and returns X ⊕ cᵢ₋₁ = pᵢ.
// TestKATIGEDerivation recomputes both from the published answers.
var (
	// FIPS 197 Appendix C.3 (AES-256: key 00…1f, E(00112233…eeff) =
	// 8ea2b7ca…6089), one block. IV: c₀ = 20…2f, p₀ = 30…3f; so
	// p₁ = 00112233…eeff ⊕ c₀ and c₁ = 8ea2b7ca…6089 ⊕ p₀.
	katIGEFIPS197 = katBlockVector{
		key:        katHex("00010203 04050607 08090a0b 0c0d0e0f 10111213 14151617 18191a1b 1c1d1e1f"),
		iv:         katHex("20212223 24252627 28292a2b 2c2d2e2f 30313233 34353637 38393a3b 3c3d3e3f"),
		plaintext:  katHex("20300010 60704050 a0b08090 e0f0c0d0"),
		ciphertext: katHex("be9385f9 65527388 d2c573ab 77745eb6"),
	}
	// NIST SP 800-38A F.1.5 (ECB-AES256.Encrypt): four blocks, four different
	// AES inputs, so the chaining from block to block is checked too. IV:
	// c₀ = 00…0f, p₀ = 10…1f; pᵢ = Xᵢ ⊕ cᵢ₋₁ and cᵢ = Yᵢ ⊕ pᵢ₋₁ with Xᵢ, Yᵢ the
	// i-th F.1.5 plaintext and ciphertext blocks.
	katIGESP80038A = katBlockVector{
		key: katSP80038AKey256,
		iv:  katHex("00010203 04050607 08090a0b 0c0d0e0f 10111213 14151617 18191a1b 1c1d1e1f"),
		plaintext: katHex(
			"6bc0bce1 2a459991 e134741a 7f9e1925",
			"4dd249f9 bfc41ab7 80e52fc9 640311b6",
			"02146bb7 5d0990a6 d8941249 54a263ba",
			"0da04c05 fc2d7559 dc9d8903 3cc0cbbb"),
		ciphertext: katHex(
			"e3ffc3ae a1c7b62b 1e524065 21ac9fe7",
			"32dc77f1 fe5574b7 3d6fd350 4ea83155",
			"fb3f6840 2362ee4e 71b6c878 daacfcab",
			"212420cd 64f06359 dee99fc6 ca868f7d"),
	}
)

var katRegistry = sync.OnceValue(katBuild)

func katBuild() []KAT {
	// The GCM specification's example key, IV, plaintext and AAD (test cases
	// 3, 4, 15 and 16 share them).
	gcmKey := katHex("feffe992 8665731c 6d6a8f94 67308308")
	gcmIV := katHex("cafebabe facedbad decaf888")
	gcmPlain := katHex(
		"d9313225 f88406e5 a55909c5 aff5269a",
		"86a7a953 1534f7da 2e4c303d 8a318a72",
		"1c3c0c95 95680953 2fcf0e24 49a6b525",
		"b16aedf5 aa0de657 ba637b39 1aafd255")
	gcmAAD := katHex("feedface deadbeef feedface deadbeef abaddad2")
	gcmCT128 := katHex(
		"42831ec2 21777424 4b7221b7 84d0d49c",
		"e3aa212f 2c02a4e0 35c17e23 29aca12e",
		"21d514b2 5466931c 7d8f6a5a ac84aa05",
		"1ba30b39 6a0aac97 3d58e091 473f5985")
	gcmCT256 := katHex(
		"522dc1f0 99567d07 f47f37a3 2a84427d",
		"643a8cdc bfe5c0c9 7598a2bd 2555d1aa",
		"8cb08e48 590dbb3d a7b08b10 56828838",
		"c5f61e63 93ba7a0a bcc9f662 898015ad")
	zero16, zero32, zero12 := make([]byte, 16), make([]byte, 32), make([]byte, 12)

	// RFC 8439 §2.8.2 and §A.5 share nothing but the cipher; XChaCha's §A.3.1
	// reuses §2.8.2's key, AAD and plaintext.
	aeadKey := katHex("80818283 84858687 88898a8b 8c8d8e8f 90919293 94959697 98999a9b 9c9d9e9f")
	aeadAAD := katHex("50515253 c0c1c2c3 c4c5c6c7")
	a2Key := katHex("1c 92 40 a5 eb 55 d3 8a f3 33 88 86 04 f6 b5 f0 47 39 17 c1 40 2b 80 09 9d ca 5c bc 20 70 75 c0")

	poly1305Key := [32]byte(katHex("85:d6:be:78:57:55:6d:33:7f:44:52:fe:42:d5:06:a8:01:03:80:8a:fb:0d:b2:fd:4a:bf:f6:af:41:49:f5:1b"))

	return []KAT{
		// The Galois/Counter Mode of Operation (GCM), D. McGrew and J. Viega,
		// revised 2005, Appendix B. Test cases 1–4 (AES-128) and 13–16
		// (AES-256): empty input, one zero block, four blocks, and 60 bytes with
		// 20 bytes of AAD.
		{Name: "AES-128-GCM/gcm-spec-tc1", Cipher: kernels.AES128GCM, check: katAEADVector{
			key: zero16, nonce: zero12,
			tag: katHex("58e2fcce fa7e3061 367f1d57 a4e7455a"),
		}.check},
		{Name: "AES-128-GCM/gcm-spec-tc2", Cipher: kernels.AES128GCM, check: katAEADVector{
			key: zero16, nonce: zero12, plaintext: zero16,
			ciphertext: katHex("0388dace 60b6a392 f328c2b9 71b2fe78"),
			tag:        katHex("ab6e47d4 2cec13bd f53a67b2 1257bddf"),
		}.check},
		{Name: "AES-128-GCM/gcm-spec-tc3", Cipher: kernels.AES128GCM, check: katAEADVector{
			key: gcmKey, nonce: gcmIV, plaintext: gcmPlain,
			ciphertext: gcmCT128,
			tag:        katHex("4d5c2af3 27cd64a6 2cf35abd 2ba6fab4"),
		}.check},
		{Name: "AES-128-GCM/gcm-spec-tc4", Cipher: kernels.AES128GCM, check: katAEADVector{
			key: gcmKey, nonce: gcmIV, plaintext: gcmPlain[:60], aad: gcmAAD,
			ciphertext: gcmCT128[:60],
			tag:        katHex("5bc94fbc 3221a5db 94fae95a e7121a47"),
		}.check},
		{Name: "AES-256-GCM/gcm-spec-tc13", Cipher: kernels.AES256GCM, check: katAEADVector{
			key: zero32, nonce: zero12,
			tag: katHex("530f8afb c74536b9 a963b4f1 c4cb738b"),
		}.check},
		{Name: "AES-256-GCM/gcm-spec-tc14", Cipher: kernels.AES256GCM, check: katAEADVector{
			key: zero32, nonce: zero12, plaintext: zero16,
			ciphertext: katHex("cea7403d 4d606b6e 074ec5d3 baf39d18"),
			tag:        katHex("d0d1c8a7 99996bf0 265b98b5 d48ab919"),
		}.check},
		{Name: "AES-256-GCM/gcm-spec-tc15", Cipher: kernels.AES256GCM, check: katAEADVector{
			key: slices.Concat(gcmKey, gcmKey), nonce: gcmIV, plaintext: gcmPlain,
			ciphertext: gcmCT256,
			tag:        katHex("b094dac5 d93471bd ec1a5022 70e3cc6c"),
		}.check},
		{Name: "AES-256-GCM/gcm-spec-tc16", Cipher: kernels.AES256GCM, check: katAEADVector{
			key: slices.Concat(gcmKey, gcmKey), nonce: gcmIV, plaintext: gcmPlain[:60], aad: gcmAAD,
			ciphertext: gcmCT256[:60],
			tag:        katHex("76fc6ece 0f4e1768 cddf8853 bb2d551b"),
		}.check},

		// NIST SP 800-38A F.5.1 (CTR-AES128.Encrypt) and F.5.5
		// (CTR-AES256.Encrypt); decrypting recovers the plaintext as in F.5.2
		// and F.5.6.
		{Name: "AES-128-CTR/sp800-38a-f.5.1", Cipher: kernels.AES128CTR, check: katStreamVector{
			key: katSP80038AKey128, iv: katHex("f0f1f2f3 f4f5f6f7 f8f9fafb fcfdfeff"), plaintext: katSP80038APlain,
			ciphertext: katHex(
				"874d6191 b620e326 1bef6864 990db6ce",
				"9806f66b 7970fdff 8617187b b9fffdff",
				"5ae4df3e dbd5d35e 5b4f0902 0db03eab",
				"1e031dda 2fbe03d1 792170a0 f3009cee"),
		}.check},
		{Name: "AES-256-CTR/sp800-38a-f.5.5", Cipher: kernels.AES256CTR, check: katStreamVector{
			key: katSP80038AKey256, iv: katHex("f0f1f2f3 f4f5f6f7 f8f9fafb fcfdfeff"), plaintext: katSP80038APlain,
			ciphertext: katHex(
				"601ec313 775789a5 b7a7f504 bbf3d228",
				"f443e3ca 4d62b59a ca84e990 cacaf5c5",
				"2b0930da a23de94c e87017ba 2d84988d",
				"dfc9c58d b67aada6 13c2dd08 457941a6"),
		}.check},

		// RFC 8439 §2.4.2 (initial counter 1) and §A.2 test vectors #1–#3
		// (counters 0, 1 and 42; 64, 375 and 127 bytes).
		{Name: "ChaCha20/rfc8439-2.4.2", Cipher: kernels.ChaCha20, check: katStreamVector{
			key:       katHex("00010203 04050607 08090a0b 0c0d0e0f 10111213 14151617 18191a1b 1c1d1e1f"),
			iv:        katChaChaIV(1, katHex("00000000 0000004a 00000000")),
			plaintext: []byte(katSunscreen),
			ciphertext: katHex(
				"6e 2e 35 9a 25 68 f9 80 41 ba 07 28 dd 0d 69 81",
				"e9 7e 7a ec 1d 43 60 c2 0a 27 af cc fd 9f ae 0b",
				"f9 1b 65 c5 52 47 33 ab 8f 59 3d ab cd 62 b3 57",
				"16 39 d6 24 e6 51 52 ab 8f 53 0c 35 9f 08 61 d8",
				"07 ca 0d bf 50 0d 6a 61 56 a3 8e 08 8a 22 b6 5e",
				"52 bc 51 4d 16 cc f8 06 81 8c e9 1a b7 79 37 36",
				"5a f9 0b bf 74 a3 5b e6 b4 0b 8e ed f2 78 5e 42",
				"87 4d"),
		}.check},
		{Name: "ChaCha20/rfc8439-a.2-tv1", Cipher: kernels.ChaCha20, check: katStreamVector{
			key: zero32, iv: katChaChaIV(0, zero12), plaintext: make([]byte, 64),
			ciphertext: katHex(
				"76 b8 e0 ad a0 f1 3d 90 40 5d 6a e5 53 86 bd 28",
				"bd d2 19 b8 a0 8d ed 1a a8 36 ef cc 8b 77 0d c7",
				"da 41 59 7c 51 57 48 8d 77 24 e0 3f b8 d8 4a 37",
				"6a 43 b8 f4 15 18 a1 1c c3 87 b6 69 b2 ee 65 86"),
		}.check},
		{Name: "ChaCha20/rfc8439-a.2-tv2", Cipher: kernels.ChaCha20, check: katStreamVector{
			key:       append(make([]byte, 31), 0x01),
			iv:        katChaChaIV(1, katHex("00000000 00000000 00000002")),
			plaintext: []byte(katIETFContribution),
			ciphertext: katHex(
				"a3 fb f0 7d f3 fa 2f de 4f 37 6c a2 3e 82 73 70",
				"41 60 5d 9f 4f 4f 57 bd 8c ff 2c 1d 4b 79 55 ec",
				"2a 97 94 8b d3 72 29 15 c8 f3 d3 37 f7 d3 70 05",
				"0e 9e 96 d6 47 b7 c3 9f 56 e0 31 ca 5e b6 25 0d",
				"40 42 e0 27 85 ec ec fa 4b 4b b5 e8 ea d0 44 0e",
				"20 b6 e8 db 09 d8 81 a7 c6 13 2f 42 0e 52 79 50",
				"42 bd fa 77 73 d8 a9 05 14 47 b3 29 1c e1 41 1c",
				"68 04 65 55 2a a6 c4 05 b7 76 4d 5e 87 be a8 5a",
				"d0 0f 84 49 ed 8f 72 d0 d6 62 ab 05 26 91 ca 66",
				"42 4b c8 6d 2d f8 0e a4 1f 43 ab f9 37 d3 25 9d",
				"c4 b2 d0 df b4 8a 6c 91 39 dd d7 f7 69 66 e9 28",
				"e6 35 55 3b a7 6c 5c 87 9d 7b 35 d4 9e b2 e6 2b",
				"08 71 cd ac 63 89 39 e2 5e 8a 1e 0e f9 d5 28 0f",
				"a8 ca 32 8b 35 1c 3c 76 59 89 cb cf 3d aa 8b 6c",
				"cc 3a af 9f 39 79 c9 2b 37 20 fc 88 dc 95 ed 84",
				"a1 be 05 9c 64 99 b9 fd a2 36 e7 e8 18 b0 4b 0b",
				"c3 9c 1e 87 6b 19 3b fe 55 69 75 3f 88 12 8c c0",
				"8a aa 9b 63 d1 a1 6f 80 ef 25 54 d7 18 9c 41 1f",
				"58 69 ca 52 c5 b8 3f a3 6f f2 16 b9 c1 d3 00 62",
				"be bc fd 2d c5 bc e0 91 19 34 fd a7 9a 86 f6 e6",
				"98 ce d7 59 c3 ff 9b 64 77 33 8f 3d a4 f9 cd 85",
				"14 ea 99 82 cc af b3 41 b2 38 4d d9 02 f3 d1 ab",
				"7a c6 1d d2 9c 6f 21 ba 5b 86 2f 37 30 e3 7c fd",
				"c4 fd 80 6c 22 f2 21"),
		}.check},
		{Name: "ChaCha20/rfc8439-a.2-tv3", Cipher: kernels.ChaCha20, check: katStreamVector{
			key:       a2Key,
			iv:        katChaChaIV(42, katHex("00000000 00000000 00000002")),
			plaintext: []byte(katJabberwocky),
			ciphertext: katHex(
				"62 e6 34 7f 95 ed 87 a4 5f fa e7 42 6f 27 a1 df",
				"5f b6 91 10 04 4c 0d 73 11 8e ff a9 5b 01 e5 cf",
				"16 6d 3d f2 d7 21 ca f9 b2 1e 5f b1 4c 61 68 71",
				"fd 84 c5 4f 9d 65 b2 83 19 6c 7f e4 f6 05 53 eb",
				"f3 9c 64 02 c4 22 34 e3 2a 35 6b 3e 76 43 12 a6",
				"1a 55 32 05 57 16 ea d6 96 25 68 f8 7d 3f 3f 77",
				"04 c6 a8 d1 bc d1 bf 4d 50 d6 15 4b 6d a7 31 b1",
				"87 b5 8d fd 72 8a fa 36 75 7a 79 7a c1 88 d1"),
		}.check},

		// RFC 8439 §2.8.2 (AEAD example, sender id 7) and §A.5 (AEAD
		// decryption).
		{Name: "ChaCha20-Poly1305/rfc8439-2.8.2", Cipher: kernels.ChaCha20Poly1305, check: katAEADVector{
			key: aeadKey, nonce: katHex("07000000 40414243 44454647"), plaintext: []byte(katSunscreen), aad: aeadAAD,
			ciphertext: katHex(
				"d3 1a 8d 34 64 8e 60 db 7b 86 af bc 53 ef 7e c2",
				"a4 ad ed 51 29 6e 08 fe a9 e2 b5 a7 36 ee 62 d6",
				"3d be a4 5e 8c a9 67 12 82 fa fb 69 da 92 72 8b",
				"1a 71 de 0a 9e 06 0b 29 05 d6 a5 b6 7e cd 3b 36",
				"92 dd bd 7f 2d 77 8b 8c 98 03 ae e3 28 09 1b 58",
				"fa b3 24 e4 fa d6 75 94 55 85 80 8b 48 31 d7 bc",
				"3f f4 de f0 8e 4b 7a 9d e5 76 d2 65 86 ce c6 4b",
				"61 16"),
			tag: katHex("1a:e1:0b:59:4f:09:e2:6a:7e:90:2e:cb:d0:60:06:91"),
		}.check},
		{Name: "ChaCha20-Poly1305/rfc8439-a.5", Cipher: kernels.ChaCha20Poly1305, check: katAEADVector{
			key: a2Key, nonce: katHex("00000000 01020304 05060708"), plaintext: []byte(katInternetDrafts),
			aad: katHex("f3 33 88 86 00 00 00 00 00 00 4e 91"),
			ciphertext: katHex(
				"64 a0 86 15 75 86 1a f4 60 f0 62 c7 9b e6 43 bd",
				"5e 80 5c fd 34 5c f3 89 f1 08 67 0a c7 6c 8c b2",
				"4c 6c fc 18 75 5d 43 ee a0 9e e9 4e 38 2d 26 b0",
				"bd b7 b7 3c 32 1b 01 00 d4 f0 3b 7f 35 58 94 cf",
				"33 2f 83 0e 71 0b 97 ce 98 c8 a8 4a bd 0b 94 81",
				"14 ad 17 6e 00 8d 33 bd 60 f9 82 b1 ff 37 c8 55",
				"97 97 a0 6e f4 f0 ef 61 c1 86 32 4e 2b 35 06 38",
				"36 06 90 7b 6a 7c 02 b0 f9 f6 15 7b 53 c8 67 e4",
				"b9 16 6c 76 7b 80 4d 46 a5 9b 52 16 cd e7 a4 e9",
				"90 40 c5 a4 04 33 22 5e e2 82 a1 b0 a0 6c 52 3e",
				"af 45 34 d7 f8 3f a1 15 5b 00 47 71 8c bc 54 6a",
				"0d 07 2b 04 b3 56 4e ea 1b 42 22 73 f5 48 27 1a",
				"0b b2 31 60 53 fa 76 99 19 55 eb d6 31 59 43 4e",
				"ce bb 4e 46 6d ae 5a 10 73 a6 72 76 27 09 7a 10",
				"49 e6 17 d9 1d 36 10 94 fa 68 f0 ff 77 98 71 30",
				"30 5b ea ba 2e da 04 df 99 7b 71 4d 6c 6f 2c 29",
				"a6 ad 5c b4 02 2b 02 70 9b"),
			tag: katHex("ee ad 9d 67 89 0c bb 22 39 23 36 fe a1 85 1f 38"),
		}.check},

		// draft-irtf-cfrg-xchacha-03 §A.3.1 (AEAD_XCHACHA20_POLY1305 example).
		{Name: "XChaCha20-Poly1305/draft-irtf-cfrg-xchacha-a.3.1", Cipher: kernels.XChaCha20Poly1305, check: katAEADVector{
			key:       aeadKey,
			nonce:     katHex("40414243 44454647 48494a4b 4c4d4e4f 50515253 54555657"),
			plaintext: []byte(katSunscreen), aad: aeadAAD,
			ciphertext: katHex(
				"bd6d179d 3e83d43b 95765794 93c0e939",
				"572a1700 252bfacc bed2902c 21396cbb",
				"731c7f1b 0b4aa644 0bf3a82f 4eda7e39",
				"ae64c670 8c54c216 cb96b72e 1213b452",
				"2f8c9ba4 0db5d945 b11b69b9 82c1bb9e",
				"3f3fac2b c369488f 76b23835 65d3fff9",
				"21f9664c 97637da9 768812f6 15c68b13",
				"b52e"),
			tag: katHex("c0875924 c1c79879 47deafd8 780acf49"),
		}.check},

		// NIST SP 800-38A F.2.1 (CBC-AES128.Encrypt) and F.2.5
		// (CBC-AES256.Encrypt); decrypting recovers the plaintext as in F.2.2
		// and F.2.6.
		{Name: "AES-128-CBC/sp800-38a-f.2.1", Cipher: kernels.AES128CBC, check: katBlockVector{
			key: katSP80038AKey128, iv: katHex("00010203 04050607 08090a0b 0c0d0e0f"), plaintext: katSP80038APlain,
			ciphertext: katHex(
				"7649abac 8119b246 cee98e9b 12e9197d",
				"5086cb9b 507219ee 95db113a 917678b2",
				"73bed6b8 e3c1743b 7116e69e 22229516",
				"3ff1caa1 681fac09 120eca30 7586e1a7"),
		}.check},
		{Name: "AES-256-CBC/sp800-38a-f.2.5", Cipher: kernels.AES256CBC, check: katBlockVector{
			key: katSP80038AKey256, iv: katHex("00010203 04050607 08090a0b 0c0d0e0f"), plaintext: katSP80038APlain,
			ciphertext: katHex(
				"f58c4c04 d6e5f1ba 779eabfb 5f7bfbd6",
				"9cfc4e96 7edb808d 679f777b c6702c7d",
				"39f23369 a9d9bacf a530e263 04231461",
				"b2eb05e2 c39be9fc da6c1907 8c6a9d1b"),
		}.check},

		// Derived from AES-256 known answers; see katIGEFIPS197.
		{Name: "AES-256-IGE/fips197-c.3", Cipher: kernels.AES256IGE, check: katIGEFIPS197.check},
		{Name: "AES-256-IGE/sp800-38a-f.1.5", Cipher: kernels.AES256IGE, check: katIGESP80038A.check},

		// The sealed format's known answers (cryptosvc.KnownAnswers), sealed
		// and opened by the code that seals messages, on each implementation:
		// docs/FORMAT.md's worked examples, and for ChaCha20-Poly1305 the
		// format's vector valid_direct_chacha20poly1305.
		{Name: "AES-256-GCM/cipherd-format-worked-example-direct", Cipher: kernels.AES256GCM, check: katFormat},
		{Name: "AES-128-GCM/cipherd-format-worked-example-envelope", Cipher: kernels.AES128GCM, check: katFormat},
		{Name: "ChaCha20-Poly1305/cipherd-format-valid-direct", Cipher: kernels.ChaCha20Poly1305, check: katFormat},

		// RFC 8439 §2.5.2. ChaCha20-Poly1305 and XChaCha20-Poly1305 are built on
		// Poly1305, so they go off when it fails.
		{
			Name:     "Poly1305/rfc8439-2.5.2",
			Disables: []kernels.Cipher{kernels.ChaCha20Poly1305, kernels.XChaCha20Poly1305},
			checkPrim: katPoly1305Vector{
				key: poly1305Key,
				msg: []byte("Cryptographic Forum Research Group"),
				tag: katHex("a8:06:1d:c1:30:51:36:c6:c2:2b:8b:af:0c:01:27:a9"),
			}.check,
		},

		// RFC 5869 Appendix A.1 (test case 1) and A.3 (test case 3: no salt, no
		// info). The sealed format derives its keys with HKDF, so these are
		// fatal.
		{
			Name:  "HKDF-SHA-256/rfc5869-tc1",
			Fatal: true,
			checkPrim: katHKDFVector{
				hash: sha256.New,
				ikm:  katHex("0b0b0b0b 0b0b0b0b 0b0b0b0b 0b0b0b0b 0b0b0b0b 0b0b"),
				salt: katHex("00010203 04050607 08090a0b 0c"),
				info: katHex("f0f1f2f3 f4f5f6f7 f8f9"),
				prk:  katHex("07770936 2c2e32df 0ddc3f0d c47bba63 90b6c73b b50f9c31 22ec844a d7c2b3e5"),
				okm: katHex("3cb25f25 faacd57a 90434f64 d0362f2a 2d2d0a90 cf1a5a4c",
					"5db02d56 ecc4c5bf 34007208 d5b88718 5865"),
			}.check,
		},
		{
			Name:  "HKDF-SHA-256/rfc5869-tc3",
			Fatal: true,
			checkPrim: katHKDFVector{
				hash: sha256.New,
				ikm:  katHex("0b0b0b0b 0b0b0b0b 0b0b0b0b 0b0b0b0b 0b0b0b0b 0b0b"),
				prk:  katHex("19ef24a3 2c717b16 7f33a91d 6f648bdf 96596776 afdb6377 ac434c1c 293ccb04"),
				okm: katHex("8da4e775 a563c18f 715f802a 063c5a31 b8a11f5c 5ee1879e",
					"c3454e5f 3c738d2d 9d201395 faa4b61a 96c8"),
			}.check,
		},
		// RFC 5869 has no SHA-512 vectors. This is Wycheproof's
		// testvectors_v1/hkdf_sha512_test.json, tcId 70 (C2SP/wycheproof,
		// Apache-2.0): a 64-byte
		// IKM and salt, 8 bytes of info, 64 bytes of output.
		{
			Name:  "HKDF-SHA-512/wycheproof-tc70",
			Fatal: true,
			checkPrim: katHKDFVector{
				hash: sha512.New,
				ikm: katHex("9fb35c09d3efebdfe522d4875d9adac74ee7eb7b845432f1cb28a9c9a48ffe63",
					"bfea2fab94106d96eff39629cf57ef5e7c3e94fb95ff8057f0894c1f352806cd"),
				salt: katHex("100d0324664c4c02443fc97e5186e38a256133e825398d387fd6138acc8b4783",
					"3f660f52c960b74bfeb30c38fba4b6e426c17dbef9d45e582ef2857afba229ae"),
				info: katHex("e7bd97cdac7d9e6b"),
				okm: katHex("a50e6839375e2a7eabc5a3610a12225b4e1d6a1cc0b4f600a528cd26ef5fee12",
					"336e39c57a001620c8e4cb9414316b11f11861c314c3acef48251867a2327c9d"),
			}.check,
		},
		// The HKDF-Expand-SHA-512 that keys every sealed message is cryptosvc's
		// own (a pooled, pre-keyed HMAC), not crypto/hkdf: docs/FORMAT.md's
		// worked example checks it, one and two output blocks.
		{Name: "HKDF-SHA-512/cipherd-format-expand", Fatal: true, checkPrim: katFormatExpand},
	}
}
