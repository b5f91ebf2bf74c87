package main

import (
	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/kernels"
)

// A stream's header ends with its wrapped data key, itself a one-chunk
// chunked-encryption message: salt (24), commitment (32), then the data key
// sealed (key size + 16-byte tag).

// envelope returns an AES-256-GCM stream under the common key and the offset
// of its wrapped key.
func (g *gen) envelope() ([]byte, int) {
	ct := g.stream1(kernels.AES256GCM, shortPlaintext, defaultContext)
	return ct, prefixLen(ct)
}

func envelopeWrappedSaltModified() Vector {
	g := newGen("envelope_wrapped_salt_modified")
	ct, w := g.envelope()
	return g.invalid("A bit flipped in the wrapped key's salt.", flip(ct, w), defaultContext, "auth")
}

func envelopeWrappedCommitmentModified() Vector {
	g := newGen("envelope_wrapped_commitment_modified")
	ct, w := g.envelope()
	return g.invalid("A bit flipped in the wrapped key's commitment.", flip(ct, w+saltSize), defaultContext, "auth")
}

func envelopeWrappedKeyModified() Vector {
	g := newGen("envelope_wrapped_key_modified")
	ct, w := g.envelope()
	return g.invalid("A bit flipped in the sealed data key.", flip(ct, w+bodyPrefix), defaultContext, "auth")
}

func envelopeWrappedTagModified() Vector {
	g := newGen("envelope_wrapped_tag_modified")
	ct, _ := g.envelope()
	return g.invalid("A bit flipped in the tag of the sealed data key (the header's last byte).", flip(ct, headerLen(ct)-1), defaultContext, "auth")
}

func envelopeWrappedKeyFromOtherStream() Vector {
	g := newGen("envelope_wrapped_key_from_other_stream")
	a, w := g.envelope()
	b, _ := g.envelope()
	ct := replace(a, w, headerLen(a), b[w:headerLen(b)])
	return g.invalid("A stream whose wrapped key was replaced by another stream's of the same key: it unwraps, to the wrong data key.", ct, defaultContext, "auth")
}

func envelopeHeaderKeyversionSwapped() Vector {
	g := newGen("envelope_header_keyversion_swapped")
	g.secrets = secrets(2)
	ct := g.stream(kernels.AES256GCM, defaultKeyName, g.secrets, shortPlaintext, defaultContext)
	ct = relabel(ct, func(h *cryptosvc.Header) { h.KeyVersion = 1 })
	return g.invalid("A stream under version 2 whose header says version 1.", ct, defaultContext, "auth")
}

func envelopeHeaderAEADSwapped() Vector {
	g := newGen("envelope_header_aead_swapped")
	ct, _ := g.envelope()
	ct = relabel(ct, func(h *cryptosvc.Header) { h.AEAD = kernels.ChaCha20Poly1305 })
	return g.invalid("An AES-256-GCM stream whose header says ChaCha20-Poly1305 (the wrapped keys are the same size).", ct, defaultContext, "auth")
}

func envelopeHeaderKeyNameRelabelled() Vector {
	g := newGen("envelope_header_key_name_relabelled")
	ct := g.stream(kernels.AES256GCM, "vector-key-a", g.secrets, shortPlaintext, defaultContext)
	ct = relabel(ct, func(h *cryptosvc.Header) { h.KeyName = defaultKeyName })
	return g.invalid(`A stream under key "vector-key-a" whose header was changed to name "vector-key", which holds the same secret.`, ct, defaultContext, "auth")
}

func envelopeSaltModified() Vector {
	g := newGen("envelope_salt_modified")
	ct, _ := g.envelope()
	return g.invalid("A bit flipped in a stream's body salt.", flip(ct, headerLen(ct)), defaultContext, "auth")
}

func envelopeCommitmentModified() Vector {
	g := newGen("envelope_commitment_modified")
	ct, _ := g.envelope()
	return g.invalid("A bit flipped in a stream's body commitment.", flip(ct, headerLen(ct)+saltSize), defaultContext, "auth")
}

func envelopeChunkModified() Vector {
	g := newGen("envelope_chunk_modified")
	ct, _ := g.envelope()
	return g.invalid("A bit flipped in a stream's only chunk.", flip(ct, headerLen(ct)+bodyPrefix), defaultContext, "auth")
}
