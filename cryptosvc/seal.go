package cryptosvc

import (
	"fmt"
	"io"
	"sync/atomic"

	"github.com/cipherd/cipherd/kernels"
)

// Labels of the two keys each key version's secret yields per AEAD:
//
//	direct input key = HKDF-Expand-SHA-512(secret, "cipherd sealed v1 direct" || 0x00 || aead || 0x00 || prefix, len(key))
//	wrapping key     = HKDF-Expand-SHA-512(secret, "cipherd sealed v1 wrap" || 0x00 || aead, len(key))
//
// where aead is the IANA name and prefix is the direct-mode header (magic to
// key version), so that a one-shot message cannot be relabelled to another key
// name or version even where two hold the same secret. The direct input key is the chunked-encryption
// input key of one-shot messages; the wrapping key is the input key of the
// one-chunk message that carries a stream's data key.
const (
	labelDirect = "cipherd sealed v1 direct"
	labelWrap   = "cipherd sealed v1 wrap"
)

// versionKeys holds the keyed PRKs one key version yields, per AEAD ID.
type versionKeys struct {
	secret Secret // to tell a cached entry from a changed secret
	direct [len(aeadIDs)]prk
	wrap   [len(aeadIDs)]prk
	use    *usageCounts // the version's counts in this process (usage.go); set by Service.versionKeys
	// ahead holds the keys of Service.Seal's next messages under this
	// version, per AEAD, derived four at a time: one-shot requests that
	// follow one another with one context (none, most often) share the
	// four-lane derivation a sealer of many messages gets
	// (BenchmarkSeal64, BenchmarkHandleEncryptJSON). Made on first use,
	// about 2 KiB with its buffers, so that versions that only open cost
	// nothing.
	ahead [len(aeadIDs)]atomic.Pointer[keysAhead]
}

// aheadFor returns the version's queue for AEAD id, making it on first use.
func (vk *versionKeys) aheadFor(id uint8) *keysAhead {
	if a := vk.ahead[id].Load(); a != nil {
		return a
	}
	vk.ahead[id].CompareAndSwap(nil, new(keysAhead))
	return vk.ahead[id].Load()
}

func deriveVersionKeys(secret *Secret, name string, version uint32) *versionKeys {
	vk := &versionKeys{secret: *secret}
	master := newPRK(secret.Expose())
	var buf [32]byte
	for id, c := range aeadIDs {
		if c == 0 {
			continue
		}
		k := buf[:c.KeySize()]
		h := Header{AEAD: c, Mode: ModeDirect, KeyName: name, KeyVersion: version}
		master.expand(k, []byte(labelDirect), zeroByte, ianaNames[id], zeroByte, h.prefix())
		vk.direct[id] = newPRKAhead(k)
		master.expand(k, []byte(labelWrap), zeroByte, ianaNames[id])
		vk.wrap[id] = newPRK(k)
	}
	clear(buf[:])
	return vk
}

// sealDirect appends a direct-mode message to dst: header, then the body
// under the version's direct input key. With ahead the salt and the key
// come from the version's queue (keysAhead), which reads four salts at a
// time; the known answers, whose randomness is given salt by salt, seal
// without it.
func sealDirect(dst []byte, rnd io.Reader, im *kernels.Implementation, h *Header, vk *versionKeys, plaintext, context []byte, ahead bool) ([]byte, error) {
	h.Mode, h.WrappedKey = ModeDirect, nil
	out, err := h.AppendBinary(dst)
	if err != nil {
		return nil, err
	}
	id := aeadID(h.AEAD)
	var keys *chunkedKeys
	if ahead {
		keys, out, err = startBodyAhead(out, vk.aheadFor(id), rnd, im, vk.direct[id], context)
	} else {
		keys, out, err = startBody(out, rnd, im, vk.direct[id], context)
	}
	if err != nil {
		return nil, err
	}
	out = keys.sealChunks(out, plaintext)
	keys.release()
	return out, nil
}

// startBody appends a fresh salt and its commitment to dst and returns the
// body's key state.
func startBody(dst []byte, rnd io.Reader, im *kernels.Implementation, input prk, context []byte) (*chunkedKeys, []byte, error) {
	// The salt is read straight into dst: a local array would escape
	// through rnd, an interface.
	dst = append(dst, make([]byte, saltSize)...)
	salt := dst[len(dst)-saltSize:]
	if _, err := io.ReadFull(rnd, salt); err != nil {
		return nil, nil, fmt.Errorf("cryptosvc: reading randomness: %w", err)
	}
	keys, commitment, err := deriveChunked(im, input, salt, context)
	if err != nil {
		return nil, nil, err
	}
	return keys, append(dst, commitment[:]...), nil
}

// startBodyAhead is startBody for a sealer of many messages: the salt and
// the derived keys come from a, four messages' at a time where a can.
func startBodyAhead(dst []byte, a *keysAhead, rnd io.Reader, im *kernels.Implementation, input prk, context []byte) (*chunkedKeys, []byte, error) {
	c := im.Cipher()
	id := aeadID(c)
	if id == 0 || input.n != c.KeySize() {
		return startBody(dst, rnd, im, input, context) // its error
	}
	k := newChunkedKeys(im)
	out := append(dst, make([]byte, saltSize)...)
	ok, err := a.take(rnd, input, id, context, out[len(dst):], k.derivedFor(c))
	if !ok || err != nil {
		k.release()
		if err != nil {
			return nil, nil, err
		}
		return startBody(dst, rnd, im, input, context)
	}
	k, commitment, err := k.useDerived(im, c)
	if err != nil {
		return nil, nil, err
	}
	return k, append(out, commitment[:]...), nil
}

// openBody checks the commitment at the start of body and returns the key
// state and the chunks that follow.
func openBody(im *kernels.Implementation, input prk, body, context []byte) (*chunkedKeys, []byte, error) {
	if len(body) < chunkedPrefix {
		return nil, nil, ErrTruncated
	}
	keys, commitment, err := deriveChunked(im, input, body[:saltSize], context)
	if err != nil {
		return nil, nil, err
	}
	if err := checkCommitment(body[saltSize:chunkedPrefix], &commitment); err != nil {
		keys.release()
		return nil, nil, err
	}
	return keys, body[chunkedPrefix:], nil
}

// newEnvelope fills h.WrappedKey with a fresh data key sealed under the
// version's wrapping key and returns the data key's PRK.
func newEnvelope(rnd io.Reader, im *kernels.Implementation, h *Header, vk *versionKeys) (prk, error) {
	var dk [32]byte
	defer clear(dk[:])
	key := dk[:h.AEAD.KeySize()]
	if _, err := io.ReadFull(rnd, key); err != nil {
		return prk{}, fmt.Errorf("cryptosvc: reading randomness: %w", err)
	}
	if err := wrapDataKey(rnd, im, h, vk, key); err != nil {
		return prk{}, err
	}
	return newPRKOnce(key), nil
}

// wrapDataKey sets h.Mode to envelope and h.WrappedKey to key sealed as a
// one-chunk message under the version's wrapping key, bound to the header's
// other fields.
func wrapDataKey(rnd io.Reader, im *kernels.Implementation, h *Header, vk *versionKeys, key []byte) error {
	h.Mode = ModeEnvelope
	keys, w, err := startBody(make([]byte, 0, wrappedKeySize(h.AEAD)), rnd, im, vk.wrap[aeadID(h.AEAD)], h.prefix())
	if err != nil {
		return err
	}
	h.WrappedKey = keys.sealChunks(w, key)
	keys.release()
	return nil
}

// unwrapDataKey returns the data key's PRK from an envelope header.
func unwrapDataKey(im *kernels.Implementation, h *Header, vk *versionKeys) (prk, error) {
	var dk [32]byte
	defer clear(dk[:])
	key, err := openDataKey(im, h, vk, &dk)
	if err != nil {
		return prk{}, err
	}
	return newPRKOnce(key), nil
}

// openDataKey opens an envelope header's wrapped data key into dk and
// returns it (a slice of dk, which the caller clears).
func openDataKey(im *kernels.Implementation, h *Header, vk *versionKeys, dk *[32]byte) ([]byte, error) {
	keys, chunks, err := openBody(im, vk.wrap[aeadID(h.AEAD)], h.WrappedKey, h.prefix())
	if err != nil {
		return nil, err
	}
	key, err := keys.openChunks(dk[:0], chunks)
	keys.release()
	if err != nil {
		return nil, err
	}
	if len(key) != h.AEAD.KeySize() {
		return nil, ErrAuthFailed
	}
	return key, nil
}

// bodyKey returns the input key of a message's body: the version's direct
// input key, or the unwrapped data key.
func bodyKey(im *kernels.Implementation, h *Header, vk *versionKeys) (prk, error) {
	if h.Mode == ModeEnvelope {
		return unwrapDataKey(im, h, vk)
	}
	return vk.direct[aeadID(h.AEAD)], nil
}
