package cryptosvc

import (
	"bufio"
	"context"

	"github.com/cipherd/cipherd/kernels"
)

// A BatchSealer seals one-shot messages under one key version, resolved once:
// the key's lookup, its AEAD, its implementation and its derived keys, and
// the encoded header. A batch of small messages is then only each message's
// own work (salt, key derivation, AEAD), written where the caller wants it
// (BenchmarkHandleEncryptBatch in server). A BatchSealer keeps the version it
// was made with, whatever rotates meanwhile. It is for one goroutine: it
// reads the salts of several messages from the random source at once (a
// salt is public, part of the message), which saves a system call or a
// vDSO call per message.
type BatchSealer struct {
	s     *Service
	prk   prk
	im    *kernels.Implementation
	hdr   []byte
	info  Info
	salts *bufio.Reader
	use   *usageCounts
	ahead keysAhead
}

// batchSalts is how many salts a BatchSealer reads at once.
const batchSalts = 32

// BatchSealer returns a BatchSealer for the latest version of key name.
func (s *Service) BatchSealer(ctx context.Context, name string) (*BatchSealer, error) {
	h, im, vk, err := s.sealTarget(ctx, name)
	if err != nil {
		return nil, err
	}
	h.Mode, h.WrappedKey = ModeDirect, nil
	hdr, err := h.AppendBinary(nil)
	if err != nil {
		return nil, err
	}
	return &BatchSealer{s: s, prk: vk.direct[aeadID(h.AEAD)], im: im, hdr: hdr, info: infoOf(&h), salts: bufio.NewReaderSize(s.rand, batchSalts*saltSize), use: vk.use}, nil
}

// Info describes the messages the BatchSealer makes.
func (z *BatchSealer) Info() Info { return z.info }

// SealedLen returns the length of the message that seals n bytes.
func (z *BatchSealer) SealedLen(n int) int {
	return len(z.hdr) + chunkedPrefix + int(chunkedLen(int64(n)))
}

// AppendSeal appends to dst the message Service.Seal would return for
// plaintext and context (with a salt of its own).
func (z *BatchSealer) AppendSeal(dst, plaintext, context []byte) ([]byte, error) {
	im := z.s.forSize(z.info.AEAD, z.im, len(plaintext))
	keys, out, err := startBodyAhead(append(dst, z.hdr...), &z.ahead, z.salts, im, z.prk, context)
	if err != nil {
		return dst, err
	}
	out = keys.sealChunks(out, plaintext)
	keys.release()
	z.use.sealed.Add(1)
	return out, nil
}

// MaxSealedLen returns the most bytes a sealed message or stream of n bytes
// of plaintext can take, whatever its key name, AEAD and mode: a bound that
// lets a server refuse a body by its length before reading it.
func MaxSealedLen(n int64) int64 {
	return maxHeaderSize + chunkedPrefix + chunkedLen(n)
}
