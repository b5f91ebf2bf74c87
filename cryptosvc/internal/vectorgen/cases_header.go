package main

import (
	"bytes"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/kernels"
)

// The header of a message under defaultKeyName, version 1 (below 128):
//
//	0: magic CD   1: format version 01   2: mode<<4 | AEAD ID
//	3: name length 0A   4…13: "vector-key"   14: key version 01
//	15…: the wrapped data key (envelope mode), then the body
const (
	offMagic   = 0
	offVersion = 1
	offModeID  = 2
	offNameLen = 3
	offName    = 4
	offKeyVer  = offName + len(defaultKeyName)
)

// direct returns a one-shot AES-256-GCM message under the common key.
func (g *gen) direct() []byte { return g.seal1(kernels.AES256GCM, shortPlaintext, defaultContext) }

func emptyCiphertext() Vector {
	g := newGen("empty_ciphertext")
	return g.invalid("No bytes at all.", nil, defaultContext, "truncated")
}

func headerTruncated() Vector {
	g := newGen("header_truncated")
	ct := g.direct()[:offName+5]
	return g.invalid("The message ends inside the header's key name.", ct, defaultContext, "truncated")
}

func headerTruncatedKeyversion() Vector {
	g := newGen("header_truncated_keyversion")
	ct := g.seal(kernels.AES256GCM, defaultKeyName, secrets(128), shortPlaintext, defaultContext)
	ct = ct[:offKeyVer+1]
	return g.invalid("The message ends inside the key version's uvarint (80 of 80 01).", ct, defaultContext, "truncated")
}

func headerTruncatedWrappedKey() Vector {
	g := newGen("header_truncated_wrapped_key")
	ct := g.stream1(kernels.AES256GCM, shortPlaintext, defaultContext)
	ct = ct[:prefixLen(ct)+40]
	return g.invalid("A stream that ends inside the wrapped data key.", ct, defaultContext, "truncated")
}

func headerOnly() Vector {
	g := newGen("header_only")
	ct := g.direct()
	return g.invalid("The header of a one-shot message and no body.", ct[:headerLen(ct)], defaultContext, "truncated")
}

func envelopeHeaderOnly() Vector {
	g := newGen("envelope_header_only")
	ct := g.stream1(kernels.AES256GCM, shortPlaintext, defaultContext)
	return g.invalid("The header of a stream, with its wrapped data key, and no body.", ct[:headerLen(ct)], defaultContext, "truncated")
}

func headerMagicWrong() Vector {
	g := newGen("header_magic_wrong")
	ct := set(g.direct(), offMagic, 0xCE)
	return g.invalid("The first byte is CE, not the magic CD.", ct, defaultContext, "malformed")
}

func headerVersionUnknown() Vector {
	g := newGen("header_version_unknown")
	ct := set(g.direct(), offVersion, 0x02)
	return g.invalid("Format version 2, which does not exist.", ct, defaultContext, "unsupported")
}

func headerVersionZero() Vector {
	g := newGen("header_version_zero")
	ct := set(g.direct(), offVersion, 0x00)
	return g.invalid("Format version 0.", ct, defaultContext, "unsupported")
}

func headerAEADUnknown() Vector {
	g := newGen("header_aead_unknown")
	ct := set(g.direct(), offModeID, 0x04)
	return g.invalid("AEAD ID 4, which does not exist (1 to 3 do).", ct, defaultContext, "unsupported")
}

func headerAEADZero() Vector {
	g := newGen("header_aead_zero")
	ct := set(g.direct(), offModeID, 0x00)
	return g.invalid("AEAD ID 0, which is reserved as invalid.", ct, defaultContext, "unsupported")
}

func headerModeUnknown() Vector {
	g := newGen("header_mode_unknown")
	ct := set(g.direct(), offModeID, 0x22)
	return g.invalid("Mode 2, which does not exist (0 direct, 1 envelope), with AEAD ID 2.", ct, defaultContext, "unsupported")
}

func headerNameEmpty() Vector {
	g := newGen("header_name_empty")
	ct := g.direct()
	ct = join(ct[:offNameLen], []byte{0}, ct[offKeyVer:])
	return g.invalid("A key name of length 0.", ct, defaultContext, "malformed")
}

func headerNameInvalidChar() Vector {
	g := newGen("header_name_invalid_char")
	ct := set(g.direct(), offName+6, '/')
	return g.invalid(`The key name "vector/key": a slash is not allowed.`, ct, defaultContext, "malformed")
}

func headerNameLeadingDot() Vector {
	g := newGen("header_name_leading_dot")
	ct := set(g.direct(), offName, '.')
	return g.invalid(`The key name ".ector-key": names must not start with a dot.`, ct, defaultContext, "malformed")
}

func headerNameTooLong() Vector {
	g := newGen("header_name_too_long")
	ct := g.direct()
	long := bytes.Repeat([]byte{'a'}, cryptosvc.MaxKeyNameLen+1)
	ct = join(ct[:offNameLen], []byte{byte(len(long))}, long, ct[offKeyVer:])
	return g.invalid("A key name of 129 bytes, one more than allowed.", ct, defaultContext, "malformed")
}

// keyVersion returns the common message with the key version's uvarint
// replaced by v.
func (g *gen) keyVersion(v ...byte) []byte {
	return replace(g.direct(), offKeyVer, offKeyVer+1, v)
}

func headerKeyversionZero() Vector {
	g := newGen("header_keyversion_zero")
	return g.invalid("Key version 0: versions start at 1.", g.keyVersion(0x00), defaultContext, "malformed")
}

func headerKeyversionNonminimalVarint() Vector {
	g := newGen("header_keyversion_nonminimal_varint")
	return g.invalid("Key version 1 encoded in two bytes (81 00): only the shortest encoding is valid.", g.keyVersion(0x81, 0x00), defaultContext, "malformed")
}

func headerKeyversionOverflow() Vector {
	g := newGen("header_keyversion_overflow")
	return g.invalid("Key version 2^35-1 (ff ff ff ff 1f), above the 32-bit range.", g.keyVersion(0xff, 0xff, 0xff, 0xff, 0x1f), defaultContext, "malformed")
}

func headerKeyversion2Pow32() Vector {
	g := newGen("header_keyversion_2pow32")
	return g.invalid("Key version 2^32 (80 80 80 80 10), one above the 32-bit range.", g.keyVersion(0x80, 0x80, 0x80, 0x80, 0x10), defaultContext, "malformed")
}

func headerKeyversionOverlong() Vector {
	g := newGen("header_keyversion_overlong")
	return g.invalid("A key version uvarint of six bytes (80 80 80 80 80 01): five continuation bytes already exceed 32 bits. Streaming readers must call it malformed too, not truncated.", g.keyVersion(0x80, 0x80, 0x80, 0x80, 0x80, 0x01), defaultContext, "malformed")
}

func headerKeyversionUnknown() Vector {
	g := newGen("header_keyversion_unknown")
	return g.invalid("Key version 2 of a key that has only version 1.", g.keyVersion(0x02), defaultContext, "key_not_found")
}

func headerKeyversionMaxUnknown() Vector {
	g := newGen("header_keyversion_max_unknown")
	return g.invalid("Key version 2^32-1 (ff ff ff ff 0f), well formed, of a key that has only version 1.", g.keyVersion(0xff, 0xff, 0xff, 0xff, 0x0f), defaultContext, "key_not_found")
}

func headerKeyversionSwapped() Vector {
	g := newGen("header_keyversion_swapped")
	g.secrets = secrets(2)
	ct := g.seal(kernels.AES256GCM, defaultKeyName, g.secrets, shortPlaintext, defaultContext)
	ct = relabel(ct, func(h *cryptosvc.Header) { h.KeyVersion = 1 })
	return g.invalid("A one-shot message under version 2 whose header says version 1.", ct, defaultContext, "auth")
}

func headerAEADSwapped() Vector {
	g := newGen("header_aead_swapped")
	ct := relabel(g.direct(), func(h *cryptosvc.Header) { h.AEAD = kernels.ChaCha20Poly1305 })
	return g.invalid("An AES-256-GCM one-shot message whose header says ChaCha20-Poly1305.", ct, defaultContext, "auth")
}

func headerModeSwappedToEnvelope() Vector {
	g := newGen("header_mode_swapped_to_envelope")
	ct := g.seal1(kernels.AES256GCM, longPlaintext(200), defaultContext)
	ct = set(ct, offModeID, ct[offModeID]|0x10)
	return g.invalid("A one-shot message whose header says envelope mode: the start of its body reads as a wrapped key.", ct, defaultContext, "auth")
}

func headerModeSwappedToDirect() Vector {
	g := newGen("header_mode_swapped_to_direct")
	ct := g.stream1(kernels.AES256GCM, shortPlaintext, defaultContext)
	ct = set(ct, offModeID, ct[offModeID]&0x0f)
	return g.invalid("A stream whose header says direct mode: its wrapped key reads as the body.", ct, defaultContext, "auth")
}

func headerKeyNameRelabelled() Vector {
	g := newGen("header_key_name_relabelled")
	ct := g.seal(kernels.AES256GCM, "vector-key-a", g.secrets, shortPlaintext, defaultContext)
	ct = relabel(ct, func(h *cryptosvc.Header) { h.KeyName = defaultKeyName })
	return g.invalid(`A one-shot message under key "vector-key-a" whose header was changed to name "vector-key", which holds the same secret: the header must be bound to the body.`, ct, defaultContext, "auth")
}

func wrongKeyName() Vector {
	g := newGen("wrong_key_name")
	ct := relabel(g.direct(), func(h *cryptosvc.Header) { h.KeyName = "other-key" })
	return g.invalid(`A message naming key "other-key", opened as "vector-key".`, ct, defaultContext, "key_mismatch")
}

func versionRetired() Vector {
	g := newGen("version_retired")
	g.secrets, g.minDec = secrets(2), 2
	ct := g.seal(kernels.AES256GCM, defaultKeyName, secrets(1), shortPlaintext, defaultContext)
	return g.invalid("A message under version 1 of a key whose min_decryption_version is 2.", ct, defaultContext, "version_retired")
}
