package cryptosvc

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/cipherd/cipherd/kernels"
)

// The sealed format (normative description: docs/FORMAT.md):
//
//	header = magic(0xCD) || version(0x01) || mode<<4 | aead
//	         || len(key name) || key name || uvarint(key version)
//	         [ || wrapped data key ]            envelope mode only
//	body   = c2sp.org/chunked-encryption ciphertext (salt, commitment, chunks)
//
// In direct mode (one-shot messages) the body's input key is derived from the
// key version's secret; in envelope mode (streams) it is a random data key,
// carried in the header sealed under a key derived from the version's secret,
// so that a rewrap rewrites the header alone.
const (
	formatMagic   = 0xCD
	formatVersion = 0x01

	headerFixed   = 4 // magic, version, mode|aead, name length
	maxHeaderSize = headerFixed + MaxKeyNameLen + binary.MaxVarintLen32 + maxWrappedKeySize
)

// Mode says how a message's body key is obtained.
type Mode uint8

const (
	// ModeDirect: the body key is derived from the key version's secret.
	// Smallest overhead; used by one-shot Seal.
	ModeDirect Mode = 0
	// ModeEnvelope: the body key is a random data key wrapped in the header.
	// Used by streams, so that Rewrap rewrites only the header.
	ModeEnvelope Mode = 1
)

func (m Mode) String() string {
	switch m {
	case ModeDirect:
		return "direct"
	case ModeEnvelope:
		return "envelope"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// aeadIDs maps the header's AEAD field to ciphers; 0 is invalid.
var aeadIDs = [...]kernels.Cipher{1: kernels.AES128GCM, 2: kernels.AES256GCM, 3: kernels.ChaCha20Poly1305}

func aeadID(c kernels.Cipher) byte {
	for id, x := range aeadIDs {
		if x == c && id != 0 {
			return byte(id)
		}
	}
	return 0
}

// wrappedKeySize is the length of a wrapped data key: a one-chunk
// chunked-encryption message of the data key, which is as long as the AEAD's key.
func wrappedKeySize(c kernels.Cipher) int { return chunkedPrefix + c.KeySize() + tagSize }

const maxWrappedKeySize = chunkedPrefix + 32 + tagSize

// Header is the decoded header of a sealed message.
type Header struct {
	AEAD       kernels.Cipher
	Mode       Mode
	KeyName    string
	KeyVersion uint32
	WrappedKey []byte // ModeEnvelope only
}

// AppendBinary appends the encoded header to b.
func (h *Header) AppendBinary(b []byte) ([]byte, error) {
	id := aeadID(h.AEAD)
	switch {
	case id == 0:
		return nil, fmt.Errorf("%w: %s is not a sealed-format AEAD", ErrUnsupported, h.AEAD)
	case h.Mode != ModeDirect && h.Mode != ModeEnvelope:
		return nil, fmt.Errorf("%w: mode %d", ErrUnsupported, h.Mode)
	case ValidateKeyName(h.KeyName) != nil:
		return nil, ErrInvalidKeyName
	case h.KeyVersion == 0:
		return nil, fmt.Errorf("%w: key version 0", ErrMalformed)
	case h.Mode == ModeEnvelope && len(h.WrappedKey) != wrappedKeySize(h.AEAD),
		h.Mode == ModeDirect && len(h.WrappedKey) != 0:
		return nil, fmt.Errorf("%w: wrapped key of %d bytes in %s mode", ErrMalformed, len(h.WrappedKey), h.Mode)
	}
	b = h.appendPrefix(b)
	return append(b, h.WrappedKey...), nil
}

// prefix returns the encoded header up to the wrapped key: what the wrapped
// key's own encryption binds as its context, so that no field of an
// envelope header can change without the data key failing to unwrap.
func (h *Header) prefix() []byte {
	return h.appendPrefix(make([]byte, 0, headerFixed+len(h.KeyName)+binary.MaxVarintLen32))
}

// appendPrefix appends the prefix to b.
func (h *Header) appendPrefix(b []byte) []byte {
	b = append(b, formatMagic, formatVersion, byte(h.Mode)<<4|aeadID(h.AEAD), byte(len(h.KeyName)))
	b = append(b, h.KeyName...)
	return binary.AppendUvarint(b, uint64(h.KeyVersion))
}

// ParseHeader decodes the header at the start of b and returns it with its
// length. It accepts only the canonical encoding, so a header that parses
// re-encodes to the same bytes.
func ParseHeader(b []byte) (Header, int, error) {
	var h Header
	if len(b) < headerFixed {
		return h, 0, ErrTruncated
	}
	if b[0] != formatMagic {
		return h, 0, fmt.Errorf("%w: not a cipherd ciphertext", ErrMalformed)
	}
	if b[1] != formatVersion {
		return h, 0, fmt.Errorf("%w: format version %d", ErrUnsupported, b[1])
	}
	mode, id := Mode(b[2]>>4), b[2]&0x0f
	if int(id) >= len(aeadIDs) || aeadIDs[id] == 0 {
		return h, 0, fmt.Errorf("%w: AEAD id %d", ErrUnsupported, id)
	}
	if mode != ModeDirect && mode != ModeEnvelope {
		return h, 0, fmt.Errorf("%w: mode %d", ErrUnsupported, mode)
	}
	h.AEAD, h.Mode = aeadIDs[id], mode
	n := int(b[3])
	if n == 0 || n > MaxKeyNameLen {
		return h, 0, fmt.Errorf("%w: invalid key name", ErrMalformed)
	}
	off := headerFixed + n
	if len(b) < off {
		return h, 0, ErrTruncated
	}
	h.KeyName = string(b[headerFixed:off])
	if ValidateKeyName(h.KeyName) != nil {
		return h, 0, fmt.Errorf("%w: invalid key name", ErrMalformed)
	}
	v, vn := binary.Uvarint(b[off:])
	switch {
	case vn == 0 && len(b)-off < binary.MaxVarintLen32: // five continuation bytes already overflow
		return h, 0, ErrTruncated
	case vn < 0 || v == 0 || v > 1<<32-1 || vn != uvarintLen(v):
		return h, 0, fmt.Errorf("%w: key version", ErrMalformed)
	}
	h.KeyVersion = uint32(v)
	off += vn
	if mode == ModeEnvelope {
		w := wrappedKeySize(h.AEAD)
		if len(b) < off+w {
			return h, 0, ErrTruncated
		}
		h.WrappedKey = slices.Clone(b[off : off+w])
		off += w
	}
	return h, off, nil
}

func uvarintLen(v uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], v)
}

// ReadHeader reads exactly one header from r and returns it with its bytes.
// It reads no byte past the header.
func ReadHeader(r io.Reader) (Header, []byte, error) {
	buf := make([]byte, 0, maxHeaderSize)
	var err error
	if buf, err = readMore(r, buf, headerFixed); err != nil {
		return Header{}, nil, err
	}
	if _, _, err := ParseHeader(buf); err != ErrTruncated {
		return Header{}, nil, err // a bad magic, version, mode or AEAD: stop here
	}
	if buf, err = readMore(r, buf, int(buf[3])); err != nil {
		return Header{}, nil, err
	}
	if _, _, err := ParseHeader(buf); err != nil && err != ErrTruncated {
		return Header{}, nil, err // a bad name: report it as Open would
	}
	for i := 0; ; i++ { // the version's uvarint, a byte at a time
		if buf, err = readMore(r, buf, 1); err != nil {
			return Header{}, nil, err
		}
		if buf[len(buf)-1] < 0x80 || i == binary.MaxVarintLen32-1 {
			break
		}
	}
	if _, _, err := ParseHeader(buf); err != nil && err != ErrTruncated {
		return Header{}, nil, err // a bad key version
	}
	if Mode(buf[2]>>4) == ModeEnvelope {
		if buf, err = readMore(r, buf, wrappedKeySize(aeadIDs[buf[2]&0x0f])); err != nil {
			return Header{}, nil, err
		}
	}
	h, n, err := ParseHeader(buf)
	if err == nil && n != len(buf) {
		err = fmt.Errorf("%w: header length", ErrMalformed)
	}
	if err != nil {
		return Header{}, nil, err
	}
	return h, buf, nil
}

// readMore appends exactly n bytes from r to buf; a short read is ErrTruncated.
func readMore(r io.Reader, buf []byte, n int) ([]byte, error) {
	l := len(buf)
	buf = slices.Grow(buf, n)[:l+n]
	if _, err := io.ReadFull(r, buf[l:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, ErrTruncated
		}
		return nil, err
	}
	return buf, nil
}
