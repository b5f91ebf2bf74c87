package main

import (
	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/kernels"
)

// The body: salt (24), commitment (32), then chunks of 16 KiB + 16-byte tag,
// the final one shorter. These cases are one-shot AES-256-GCM messages under
// the common key.

// chunked returns a one-shot message of n bytes of long plaintext, split.
func (g *gen) chunked(n int) (header, prefix []byte, chunks [][]byte) {
	return split(g.seal1(kernels.AES256GCM, longPlaintext(n), defaultContext))
}

func saltModified() Vector {
	g := newGen("salt_modified")
	ct := g.direct()
	return g.invalid("A bit flipped in the body's salt.", flip(ct, headerLen(ct)), defaultContext, "auth")
}

func commitmentModified() Vector {
	g := newGen("commitment_modified")
	ct := g.direct()
	return g.invalid("A bit flipped in the body's commitment.", flip(ct, headerLen(ct)+saltSize+commitmentSize-1), defaultContext, "auth")
}

func saltTruncated() Vector {
	g := newGen("salt_truncated")
	ct := g.direct()
	return g.invalid("The message ends inside the salt.", ct[:headerLen(ct)+10], defaultContext, "truncated")
}

func commitmentTruncated() Vector {
	g := newGen("commitment_truncated")
	ct := g.direct()
	return g.invalid("The message ends inside the commitment.", ct[:headerLen(ct)+saltSize+16], defaultContext, "truncated")
}

func chunkBodyModified() Vector {
	g := newGen("chunk_body_modified")
	ct := g.direct()
	return g.invalid("A bit flipped in the ciphertext of the only chunk.", flip(ct, headerLen(ct)+bodyPrefix), defaultContext, "auth")
}

func chunkTagModified() Vector {
	g := newGen("chunk_tag_modified")
	return g.invalid("A bit flipped in the tag of the only chunk (the last byte).", flip(g.direct(), -1), defaultContext, "auth")
}

func chunkTruncatedFinal() Vector {
	g := newGen("chunk_truncated_final")
	h, p, c := g.chunked(cryptosvc.ChunkSize + 100)
	ct := join(h, p, c[0], c[1][:len(c[1])-1])
	return g.invalid("A full chunk, then the final chunk less its last byte.", ct, defaultContext, "auth")
}

func chunkFinalShorterThanTag() Vector {
	g := newGen("chunk_final_shorter_than_tag")
	h, p, c := g.chunked(cryptosvc.ChunkSize + 1)
	ct := join(h, p, c[0], c[1][:tagSize-1])
	return g.invalid("A full chunk, then 15 bytes: too short to be a chunk.", ct, defaultContext, "truncated")
}

func chunkMissingFinal() Vector {
	g := newGen("chunk_missing_final")
	h, p, c := g.chunked(cryptosvc.ChunkSize + 100)
	ct := join(h, p, c[0])
	return g.invalid("A full chunk and no final chunk: the message ends at a chunk boundary.", ct, defaultContext, "truncated")
}

func chunkMissingFinalEmpty() Vector {
	g := newGen("chunk_missing_final_empty")
	h, p, c := g.chunked(cryptosvc.ChunkSize)
	ct := join(h, p, c[0])
	return g.invalid("A message of exactly one chunk without its empty final chunk.", ct, defaultContext, "truncated")
}

func chunkTrailingData() Vector {
	g := newGen("chunk_trailing_data")
	ct := join(g.direct(), []byte("garbage"))
	return g.invalid("Seven bytes after the final chunk.", ct, defaultContext, "auth")
}

func chunkTrailingChunk() Vector {
	g := newGen("chunk_trailing_chunk")
	h, p, c := g.chunked(cryptosvc.ChunkSize + 10)
	ct := join(h, p, c[0], c[1], c[1])
	return g.invalid("The final chunk, then the final chunk again.", ct, defaultContext, "auth")
}

func chunksReordered() Vector {
	g := newGen("chunks_reordered")
	h, p, c := g.chunked(2*cryptosvc.ChunkSize + 10)
	ct := join(h, p, c[1], c[0], c[2])
	return g.invalid("The first two of three chunks swapped.", ct, defaultContext, "auth")
}

func chunkDuplicated() Vector {
	g := newGen("chunk_duplicated")
	h, p, c := g.chunked(2*cryptosvc.ChunkSize + 10)
	ct := join(h, p, c[0], c[0], c[2])
	return g.invalid("The first chunk in place of the second.", ct, defaultContext, "auth")
}

func chunkDropped() Vector {
	g := newGen("chunk_dropped")
	h, p, c := g.chunked(2*cryptosvc.ChunkSize + 10)
	ct := join(h, p, c[0], c[2])
	return g.invalid("The second of three chunks removed.", ct, defaultContext, "auth")
}

func wrongContext() Vector {
	g := newGen("wrong_context")
	return g.invalid("Opened with another context than it was sealed with.", g.direct(), []byte("cipherd test vector context!"), "auth")
}

func contextMissing() Vector {
	g := newGen("context_missing")
	return g.invalid("Opened with an empty context; it was sealed with one.", g.direct(), nil, "auth")
}

func wrongKey() Vector {
	g := newGen("wrong_key")
	g.secrets = [][]byte{secret(1000)}
	return g.invalid("The key of that name and version holds another secret.", g.direct(), defaultContext, "auth")
}

func spliceTwoMessages() Vector {
	g := newGen("splice_two_messages")
	a, _ := g.envelope()
	b, _ := g.envelope()
	ct := join(a[:headerLen(a)], b[headerLen(b):])
	return g.invalid("The header of one stream and the body of another, under the same key.", ct, defaultContext, "auth")
}

func spliceChunksTwoMessages() Vector {
	g := newGen("splice_chunks_two_messages")
	h, p, _ := g.chunked(cryptosvc.ChunkSize + 10)
	_, _, c := g.chunked(cryptosvc.ChunkSize + 10)
	ct := join(h, p, c[0], c[1])
	return g.invalid("The header, salt and commitment of one message and the chunks of another of the same length.", ct, defaultContext, "auth")
}
