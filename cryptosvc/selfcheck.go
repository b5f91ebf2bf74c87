package cryptosvc

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/cipherd/cipherd/kernels"
)

// Known answers of the sealed format, computed by the very functions that key
// and seal messages: the version-key derivation and the chunked-encryption
// key derivation (this package's HKDF-Expand-SHA-512, not crypto/hkdf), the
// header encoding, the body's chunking and nonces, and the AEAD
// implementation the Service will use. New runs them once per implementation
// and refuses to build a Service on one that gets an answer wrong; the
// selftest package runs them at start-up beside its cipher vectors.
//
// The answers are docs/FORMAT.md's worked examples (AES-256-GCM in direct
// mode, AES-128-GCM in envelope mode, with their intermediate values) and,
// for ChaCha20-Poly1305, which the worked examples do not cover, the vector
// testdata/vectors/valid_direct_chacha20poly1305.json. The randomness is the
// examples' stand-in counter, or the vector's own salt.

// ErrSelfTest is returned by New when an implementation gets a known answer
// of the sealed format wrong.
var ErrSelfTest = errors.New("cryptosvc: known-answer self-test failed")

// A KnownAnswer is one value the sealing code computed and the value the
// specification gives for it.
type KnownAnswer struct {
	Name string // what was computed, e.g. "direct input key"
	Got  []byte
	Want []byte
}

// selfExample is one worked example: its key, inputs and answers.
type selfExample struct {
	aead      kernels.Cipher
	mode      Mode
	keyName   string
	secret    []byte
	plaintext []byte
	context   []byte
	rand      []byte // the randomness sealing reads, in order
	message   []byte
	// Intermediate values, when the source gives them: the version's input
	// key for the mode (direct input key or wrapping key) and the body's
	// chunked-encryption key || base nonce (|| commitment for direct mode).
	inputKey []byte
	derived  []byte
}

func unhex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic("cryptosvc: bad known answer: " + err.Error())
	}
	return b
}

func counterBytes(start byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = start + byte(i)
	}
	return b
}

// selfExamples holds one example per sealed-format AEAD. A variable, so that
// a test can corrupt an answer and watch New refuse.
var selfExamples = []selfExample{
	{ // docs/FORMAT.md, "Direct mode, AES-256-GCM"
		aead: kernels.AES256GCM, mode: ModeDirect, keyName: "orders",
		secret: counterBytes(0x00, 32), plaintext: []byte("hello, world"), context: []byte("order-id=42"),
		rand: counterBytes(0x80, saltSize),
		message: unhex("cd0102066f726465727301808182838485868788898a8b8c8d8e8f9091929394" +
			"95969746fa36eb14a599faa6277076340a45116633b57f8a554bcdea53767769" +
			"fa346f47e45cb9865ec24652485a52158e276c5a2e924bd4341fba057f4a13"),
		inputKey: unhex("2fa77f16eca3855a42be9c5e47ff6bf85ee0ff5d3c9dc91a1e46f87e24f49388"),
		derived: unhex("64987a6107ea601008fe574cb6084577bc243ecefdcfedbdc4e1b3a7142b9b32" +
			"f327936678dfc1c4e2f867b1" +
			"46fa36eb14a599faa6277076340a45116633b57f8a554bcdea53767769fa346f"),
	},
	{ // docs/FORMAT.md, "Envelope mode, AES-128-GCM"
		aead: kernels.AES128GCM, mode: ModeEnvelope, keyName: "orders",
		secret: counterBytes(0x00, 32), plaintext: []byte("hello, world"), context: []byte("order-id=42"),
		rand: counterBytes(0x80, 16+2*saltSize), // data key, wrap salt, body salt
		message: unhex("cd0111066f726465727301909192939495969798999a9b9c9d9e9fa0a1a2a3a4" +
			"a5a6a7eb55ece2d39dfa2ff5103a35aee4551aa17e2fc51a043aca94e46878ed" +
			"cb8418e1407363660136c8a60c0cf42f21069b5d1d6a353e19aedbf49df69a89" +
			"380e1fa8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf606389400b" +
			"3bf3dd993032fee4905da27fc94b7877bbbdb2123f3d483beee8fa841487e5c7" +
			"9b1de705002f7edc96ce36c7156aaa521607ccdff3e716"),
		inputKey: unhex("bd1054946d794af1f10005ec2f6cbd5e"),
		derived:  unhex("5454814eabce7ef1f76945f76d918b70" + "be7922df28a2f7345c9553de"),
	},
	{ // testdata/vectors/valid_direct_chacha20poly1305.json
		aead: kernels.ChaCha20Poly1305, mode: ModeDirect, keyName: "vector-key",
		secret:    unhex("40e233f5d4411ac96ed2e5f0f4e58e703b02c657db473ba6eeafe9899d147225"),
		plaintext: []byte("cipherd test vector plaintext"), context: []byte("cipherd test vector context"),
		rand: unhex("dad429ab0d16cf595d668ba8b59b4c788f56dc4897da50ee"),
		message: unhex("cd01030a766563746f722d6b657901dad429ab0d16cf595d668ba8b59b4c788f" +
			"56dc4897da50ee501be4a1cec4cf164110d9696087f8fac39ed8a35506a6296e" +
			"08abc5202b0a8035c28c28eeedd4abb1a4262e92f8830de0f5374e21a7da36b9" +
			"dc65827cac2e9d291808ef02614dafc2b1c94423"),
	},
}

// KnownAnswers seals and opens the sealed format's known-answer example for
// im's AEAD with im, and returns every value computed beside its answer. It
// fails if im's cipher is not a sealed-format AEAD, or if sealing fails, or
// if a tampered copy of the message opens.
func KnownAnswers(im *kernels.Implementation) ([]KnownAnswer, error) {
	i := -1
	for j := range selfExamples {
		if selfExamples[j].aead == im.Cipher() {
			i = j
		}
	}
	if i < 0 {
		return nil, fmt.Errorf("%w: %s is not an AEAD of the sealed format", ErrUnsupported, im.Cipher())
	}
	return selfExamples[i].run(im)
}

func (e *selfExample) run(im *kernels.Implementation) ([]KnownAnswer, error) {
	var out []KnownAnswer
	add := func(name string, got, want []byte) {
		if want != nil {
			out = append(out, KnownAnswer{Name: name, Got: got, Want: want})
		}
	}
	secret, err := NewSecret(e.secret)
	if err != nil {
		return nil, err
	}
	vk := deriveVersionKeys(&secret, e.keyName, 1)
	id := aeadID(e.aead)
	rnd := bytes.NewReader(e.rand)
	h := Header{AEAD: e.aead, KeyName: e.keyName, KeyVersion: 1}

	var msg []byte
	switch e.mode {
	case ModeDirect:
		add("HKDF-Expand-SHA-512: direct input key",
			expandOut(newPRK(e.secret), e.aead.KeySize(), []byte(labelDirect), zeroByte, ianaNames[id], zeroByte, h.prefix()), e.inputKey)
		add("HKDF-Expand-SHA-512: body key, base nonce and commitment",
			expandOut(vk.direct[id], len(e.derived), chunkedInfoPrefix, ianaNames[id], zeroByte, e.rand, e.context), e.derived)
		for lane := range aheadLanes {
			if got := expand4Out(vk.direct[id], len(e.derived), lane, chunkedInfoPrefix, ianaNames[id], zeroByte, e.rand, e.context); got != nil {
				add(fmt.Sprintf("HKDF-Expand-SHA-512, four at once, lane %d: body key, base nonce and commitment", lane), got, e.derived)
			}
		}
		msg, err = sealDirect(nil, rnd, im, &h, vk, e.plaintext, e.context, false)
	case ModeEnvelope:
		add("HKDF-Expand-SHA-512: wrapping key",
			expandOut(newPRK(e.secret), e.aead.KeySize(), []byte(labelWrap), zeroByte, ianaNames[id]), e.inputKey)
		dataKey := e.rand[:e.aead.KeySize()]
		bodySalt := e.rand[len(e.rand)-saltSize:]
		add("HKDF-Expand-SHA-512: body key and base nonce",
			expandOut(newPRKOnce(dataKey), len(e.derived), chunkedInfoPrefix, ianaNames[id], zeroByte, bodySalt, e.context), e.derived)
		msg, err = sealEnvelope(rnd, im, &h, vk, e.plaintext, e.context)
	}
	if err != nil {
		return nil, err
	}
	add("sealed message", msg, e.message)

	plain, err := openKnown(im, vk, e.message, e.context)
	if err != nil {
		return nil, fmt.Errorf("opening the known message: %w", err)
	}
	add("opened plaintext", plain, e.plaintext)
	tampered := bytes.Clone(e.message)
	tampered[len(tampered)-1] ^= 0x80
	if _, err := openKnown(im, vk, tampered, e.context); !errors.Is(err, ErrAuthFailed) {
		return nil, fmt.Errorf("a message with a flipped tag bit: got %v, want %v", err, ErrAuthFailed)
	}
	return out, nil
}

// ExpandKnownAnswers checks this package's HKDF-Expand-SHA-512, the key
// derivation of every sealed message, with no AEAD involved: the direct-mode
// worked example's direct input key (one output block) and its body key,
// base nonce and commitment (two blocks, expanded from the version keys that
// deriveVersionKeys makes).
func ExpandKnownAnswers() []KnownAnswer {
	e := &selfExamples[0]
	id := aeadID(e.aead)
	secret, err := NewSecret(e.secret)
	if err != nil {
		panic("cryptosvc: bad known answer: " + err.Error())
	}
	h := Header{AEAD: e.aead, KeyName: e.keyName, KeyVersion: 1}
	vk := deriveVersionKeys(&secret, e.keyName, 1)
	answers := []KnownAnswer{
		{Name: "HKDF-Expand-SHA-512: direct input key",
			Got:  expandOut(newPRK(e.secret), e.aead.KeySize(), []byte(labelDirect), zeroByte, ianaNames[id], zeroByte, h.prefix()),
			Want: e.inputKey},
		{Name: "HKDF-Expand-SHA-512: body key, base nonce and commitment",
			Got:  expandOut(vk.direct[id], len(e.derived), chunkedInfoPrefix, ianaNames[id], zeroByte, e.rand, e.context),
			Want: e.derived},
	}
	for lane := range aheadLanes {
		if got := expand4Out(vk.direct[id], len(e.derived), lane, chunkedInfoPrefix, ianaNames[id], zeroByte, e.rand, e.context); got != nil {
			answers = append(answers, KnownAnswer{
				Name: fmt.Sprintf("HKDF-Expand-SHA-512, four at once, lane %d: body key, base nonce and commitment", lane),
				Got:  got, Want: e.derived})
		}
	}
	return answers
}

// expand4Out returns n bytes of lane's output of p.expand4 with info in
// that lane and, in the three others, info with every bit flipped, so that
// a lane that read another's input answers wrong. It returns nil where p
// has no four-lane derivation (kernels.SHA512x4 unavailable).
func expand4Out(p prk, n, lane int, info ...[]byte) []byte {
	if p.pads == nil {
		return nil
	}
	mine := bytes.Join(info, nil)
	other := bytes.Clone(mine)
	for i := range other {
		other[i] ^= 0xff
	}
	var hs kernels.SHA512x4
	var scratch, outs, infos [aheadLanes][]byte
	for j := range aheadLanes {
		outs[j] = make([]byte, n)
		infos[j] = other
	}
	infos[lane] = mine
	got := outs[lane]
	p.expand4(&hs, &scratch, &outs, &infos)
	return got
}

// expandOut returns n bytes of p.expand(info...).
func expandOut(p prk, n int, info ...[]byte) []byte {
	b := make([]byte, n)
	p.expand(b, info...)
	return b
}

// sealEnvelope is a one-chunk stream: the header with a fresh wrapped data
// key, then the body under the data key, as EncryptWriter writes it.
func sealEnvelope(rnd *bytes.Reader, im *kernels.Implementation, h *Header, vk *versionKeys, plaintext, context []byte) ([]byte, error) {
	input, err := newEnvelope(rnd, im, h, vk)
	if err != nil {
		return nil, err
	}
	out, err := h.AppendBinary(nil)
	if err != nil {
		return nil, err
	}
	keys, out, err := startBody(out, rnd, im, input, context)
	if err != nil {
		return nil, err
	}
	out = keys.sealChunks(out, plaintext)
	keys.release()
	return out, nil
}

// openKnown opens a whole message as Open does, under vk.
func openKnown(im *kernels.Implementation, vk *versionKeys, msg, context []byte) ([]byte, error) {
	h, n, err := ParseHeader(msg)
	if err != nil {
		return nil, err
	}
	input, err := bodyKey(im, &h, vk)
	if err != nil {
		return nil, err
	}
	keys, chunks, err := openBody(im, input, msg[n:], context)
	if err != nil {
		return nil, err
	}
	pt, err := keys.openChunks(nil, chunks)
	keys.release()
	return pt, err
}

// SelfTest checks im against the sealed format's known answers and returns
// an error wrapping ErrSelfTest that names the first wrong value (never its
// bytes).
func SelfTest(im *kernels.Implementation) error {
	answers, err := KnownAnswers(im)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrSelfTest, im, err)
	}
	for _, a := range answers {
		if !bytes.Equal(a.Got, a.Want) {
			return fmt.Errorf("%w: %s: %s differs from the known answer", ErrSelfTest, im, a.Name)
		}
	}
	return nil
}

// selfTested records the implementations that passed SelfTest in this
// process, so that New checks each one once: the code of an implementation
// does not change while the process runs.
var selfTested sync.Map // *kernels.Implementation → struct{}

// selfTestOnce runs SelfTest on im unless it passed before.
func selfTestOnce(im *kernels.Implementation) error {
	if _, ok := selfTested.Load(im); ok {
		return nil
	}
	if err := SelfTest(im); err != nil {
		return err
	}
	selfTested.Store(im, struct{}{})
	return nil
}
