package cryptosvc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/cipherd/cipherd/kernels"
)

// A sealer that makes many messages derives each one's key from a fresh
// salt: HKDF-Expand-SHA-512 over the salt and the context, which for a
// 32-byte key is five SHA-512 compressions in a chain, each waiting on the
// last. keysAhead derives the keys of a sealer's next four messages at once,
// one message per lane of kernels.SHA512x4, for less than twice what one
// message's key costs alone (BenchmarkDeriveAhead, per message, against
// BenchmarkLocalSeal/*/derive-one). It starts at the second message in a
// row with the same context: a sealer of one message, or of messages whose
// contexts all differ, derives each key alone and reads no salt it does
// not use. Keys derived ahead and dropped when the context changed are
// wasted work, so after such a drop it waits for four messages in a row
// with one context before deriving ahead again: contexts that change every
// other message cost one wasted derivation, not one per change
// (TestKeysAheadBacksOff).
//
// The queued salts and keys are the next messages', cleared from the queue
// as they are taken. A sealer dropped with keys queued leaves them to the
// garbage collector unwiped: no message was made under their salts, so they
// open nothing, and HKDF gives nothing of the data key away.
type keysAhead struct {
	mu      sync.Mutex
	context []byte        // of the queued keys, and of the last message sealed
	pads    *[2][8]uint64 // the PRK of the queued keys
	id      uint8         // their AEAD
	size    int           // the length of each one's material
	next, n int           // queued: derived[next:n]
	run     int           // messages in a row with context, this one included
	wary    bool          // keys were dropped unused: wait for a longer run
	salt    [aheadLanes * saltSize]byte
	derived [aheadLanes][32 + chunkNonceSize + commitmentSize]byte
	info    [aheadLanes][]byte // each lane's info
	scratch [aheadLanes][]byte
	hs      kernels.SHA512x4
}

const (
	aheadLanes = 4
	// aheadMaxContext bounds the context keysAhead derives for, so that
	// its scratch space stays small; longer contexts derive one at a time.
	aheadMaxContext = 1 << 10
)

// take writes into salt and out the salt and derived key material (key,
// base nonce, commitment: out's length) of the next message with context,
// and reports whether it did. false means the caller derives this message
// alone; take then remembers the context, so that a run of messages with
// the same one is derived four at a time.
func (a *keysAhead) take(rnd io.Reader, input prk, id uint8, context []byte, salt, out []byte) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	same := a.context != nil && bytes.Equal(a.context, context)
	if a.next < a.n && a.pads == input.pads && a.id == id && a.size == len(out) && same {
		a.run++
		a.pop(salt, out)
		return true, nil
	}
	if a.next < a.n {
		a.wary = true
	}
	a.drop()
	if !same {
		a.context = append(a.context[:0], context...)
		if a.context == nil {
			a.context = []byte{} // seen, and empty
		}
		a.run = 0
	}
	a.run++
	need := 2
	if a.wary {
		need = aheadLanes
	}
	if input.pads == nil || len(context) > aheadMaxContext || a.run < need {
		return false, nil
	}
	if _, err := io.ReadFull(rnd, a.salt[:]); err != nil {
		return false, fmt.Errorf("cryptosvc: reading randomness: %w", err)
	}
	var outs [aheadLanes][]byte
	for j := range aheadLanes {
		outs[j] = a.derived[j][:len(out)]
		b := append(a.info[j][:0], chunkedInfoPrefix...)
		b = append(b, ianaNames[id]...)
		b = append(b, 0)
		b = append(b, a.salt[j*saltSize:(j+1)*saltSize]...)
		a.info[j] = append(b, context...)
	}
	input.expand4(&a.hs, &a.scratch, &outs, &a.info)
	for j := range aheadLanes {
		clear(a.info[j])
	}
	a.next, a.n, a.pads, a.id, a.size = 0, aheadLanes, input.pads, id, len(out)
	a.pop(salt, out)
	return true, nil
}

func (a *keysAhead) pop(salt, out []byte) {
	s := a.salt[a.next*saltSize : (a.next+1)*saltSize]
	copy(salt, s)
	copy(out, a.derived[a.next][:len(out)])
	clear(s)
	clear(a.derived[a.next][:])
	a.next++
	if a.next == a.n {
		a.wary = false // every key derived ahead was used
	}
}

// drop clears what is queued.
func (a *keysAhead) drop() {
	clear(a.salt[:])
	clear(a.derived[:])
	a.next, a.n = 0, 0
}

// hmacPads returns the chaining values of SHA-512 after the HMAC key's
// inner and outer padded blocks (RFC 2104), from which every HMAC under the
// key starts. key is at most one block long, as a PRK here always is.
func hmacPads(key []byte) *[2][8]uint64 {
	var hs kernels.SHA512x4
	var blk [2][128]byte
	for i := range 128 {
		var k byte
		if i < len(key) {
			k = key[i]
		}
		blk[0][i], blk[1][i] = k^0x36, k^0x5c
	}
	for j := range aheadLanes {
		hs.SetLane(j, &kernels.SHA512IV)
	}
	hs.Blocks(&[aheadLanes][]byte{blk[0][:], blk[1][:], blk[0][:], blk[1][:]})
	pads := &[2][8]uint64{hs.Lane(0), hs.Lane(1)}
	clear(blk[0][:])
	clear(blk[1][:])
	hs.Wipe()
	return pads
}

// expand4 writes HKDF-Expand(p, infos[j]) into outs[j] for four infos of
// the same length and outputs of the same length, as expand does for one:
// each block T(i) = HMAC(p, T(i-1) || info || i), the four lanes in step.
// scratch is its space for the blocks it hashes, grown as needed and
// cleared before it returns.
func (p prk) expand4(hs *kernels.SHA512x4, scratch *[aheadLanes][]byte, outs *[aheadLanes][]byte, infos *[aheadLanes][]byte) {
	infoLen := len(infos[0])
	var t [aheadLanes][64]byte
	var msgs [aheadLanes][]byte
	for i := 0; len(outs[0]) > 0; i++ {
		// Inner hash: the ipad block is already in the chaining value; what
		// follows is T(i-1) || info || i, padded, after 128 bytes.
		m := infoLen + 1
		if i > 0 {
			m += 64
		}
		blocks := (m + 17 + 127) / 128
		for j := range aheadLanes {
			b := scratch[j][:0]
			if cap(b) < 128*blocks {
				b = make([]byte, 0, 128*blocks)
			}
			if i > 0 {
				b = append(b, t[j][:]...)
			}
			b = append(b, infos[j]...)
			b = append(b, byte(i+1))
			msgs[j] = sha512PadTo(b, 128*blocks, 128+m)
			scratch[j] = b
			hs.SetLane(j, &p.pads[0])
		}
		hs.Blocks(&msgs)
		// Outer hash: the opad block, then the inner digest, padded.
		for j := range aheadLanes {
			hs.PutLane(j, &t[j])
			msgs[j] = sha512PadTo(append(scratch[j][:0], t[j][:]...), 128, 128+64)
			hs.SetLane(j, &p.pads[1])
		}
		hs.Blocks(&msgs)
		for j := range aheadLanes {
			hs.PutLane(j, &t[j])
			outs[j] = outs[j][copy(outs[j], t[j][:]):]
		}
	}
	for j := range aheadLanes {
		clear(t[j][:])
		clear(scratch[j][:cap(scratch[j])])
	}
	hs.Wipe()
}

// sha512PadTo pads b, the end of a message of total bytes, to n bytes
// (FIPS 180-4 §5.1.2) in b's own array, whose capacity must be n.
func sha512PadTo(b []byte, n, total int) []byte {
	m := len(b)
	b = b[:n]
	b[m] = 0x80
	clear(b[m+1 : n-8])
	binary.BigEndian.PutUint64(b[n-8:], uint64(total)*8)
	return b
}
