package main

import (
	"context"
	"strings"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/kernels"
)

func validDirect(name string, aead kernels.Cipher) Vector {
	g := newGen(name)
	ct := g.seal1(aead, shortPlaintext, defaultContext)
	return g.valid("A one-shot message (direct mode) under "+aead.String()+".", ct, defaultContext, shortPlaintext)
}

func validDirectAES128GCM() Vector { return validDirect("valid_direct_aes128gcm", kernels.AES128GCM) }
func validDirectAES256GCM() Vector { return validDirect("valid_direct_aes256gcm", kernels.AES256GCM) }
func validDirectChaCha20Poly1305() Vector {
	return validDirect("valid_direct_chacha20poly1305", kernels.ChaCha20Poly1305)
}

func validEnvelope(name string, aead kernels.Cipher) Vector {
	g := newGen(name)
	ct := g.stream1(aead, shortPlaintext, defaultContext)
	return g.valid("A stream (envelope mode) under "+aead.String()+": the header carries the wrapped data key.", ct, defaultContext, shortPlaintext)
}

func validEnvelopeAES128GCM() Vector {
	return validEnvelope("valid_envelope_aes128gcm", kernels.AES128GCM)
}
func validEnvelopeAES256GCM() Vector {
	return validEnvelope("valid_envelope_aes256gcm", kernels.AES256GCM)
}
func validEnvelopeChaCha20Poly1305() Vector {
	return validEnvelope("valid_envelope_chacha20poly1305", kernels.ChaCha20Poly1305)
}

func validEmpty() Vector {
	g := newGen("valid_empty")
	ct := g.seal1(kernels.AES256GCM, nil, nil)
	return g.valid("An empty one-shot message with an empty context: one empty chunk.", ct, nil, nil)
}

func validEnvelopeEmpty() Vector {
	g := newGen("valid_envelope_empty")
	ct := g.stream1(kernels.AES256GCM, nil, defaultContext)
	return g.valid("An empty stream: the header, then one empty chunk.", ct, defaultContext, nil)
}

func validExactChunk() Vector {
	g := newGen("valid_exact_chunk")
	pt := longPlaintext(cryptosvc.ChunkSize)
	ct := g.seal1(kernels.AES256GCM, pt, defaultContext)
	return g.valid("A message of exactly one chunk: a full chunk, then the empty final chunk.", ct, defaultContext, pt)
}

func validMultiChunk() Vector {
	g := newGen("valid_multi_chunk")
	pt := longPlaintext(2*cryptosvc.ChunkSize + 1)
	ct := g.seal1(kernels.AES128GCM, pt, defaultContext)
	return g.valid("Two full chunks and a final chunk of one byte.", ct, defaultContext, pt)
}

func validContextBinary() Vector {
	g := newGen("valid_context_binary")
	ctx := []byte{0, 'c', 0, 0xff, 0x80, 0}
	ct := g.seal1(kernels.ChaCha20Poly1305, shortPlaintext, ctx)
	return g.valid("A context with NUL and non-ASCII bytes.", ct, ctx, shortPlaintext)
}

func validKeyversion2() Vector {
	g := newGen("valid_keyversion_2")
	g.secrets = secrets(2)
	ct := g.seal(kernels.AES256GCM, defaultKeyName, g.secrets, shortPlaintext, defaultContext)
	return g.valid("A message under the key's version 2, its latest.", ct, defaultContext, shortPlaintext)
}

func validKeyversion128() Vector {
	g := newGen("valid_keyversion_128")
	g.secrets = secrets(128)
	ct := g.seal(kernels.AES256GCM, defaultKeyName, g.secrets, shortPlaintext, defaultContext)
	return g.valid("A message under version 128, the first whose uvarint takes two bytes (80 01).", ct, defaultContext, shortPlaintext)
}

func validOldKeyversion() Vector {
	g := newGen("valid_old_keyversion")
	g.secrets = secrets(2)
	ct := g.seal(kernels.AES256GCM, defaultKeyName, secrets(1), shortPlaintext, defaultContext)
	return g.valid("A message under version 1 of a key now at version 2: old versions keep opening.", ct, defaultContext, shortPlaintext)
}

func validKeyNameMax() Vector {
	g := newGen("valid_key_name_max")
	g.keyName = "K" + strings.Repeat("a0_.-", (cryptosvc.MaxKeyNameLen-1)/5) + "zz"
	ct := g.seal(kernels.AES256GCM, g.keyName, g.secrets, shortPlaintext, defaultContext)
	return g.valid("A key name of the greatest length, 128 bytes, using every allowed punctuation.", ct, defaultContext, shortPlaintext)
}

func validRewrappedEnvelope() Vector {
	g := newGen("valid_rewrapped_envelope")
	g.secrets = secrets(2)
	old := g.stream(kernels.AES256GCM, defaultKeyName, secrets(1), shortPlaintext, defaultContext)
	ct, _, err := g.service(kernels.AES256GCM, defaultKeyName, g.secrets).Rewrap(context.Background(), defaultKeyName, old, nil)
	must(err)
	return g.valid("A stream sealed under version 1 and rewrapped to version 2: a new header before the same body.", ct, defaultContext, shortPlaintext)
}
