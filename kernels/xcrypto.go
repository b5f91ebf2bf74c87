package kernels

import (
	"crypto/cipher"
	"encoding/binary"

	"golang.org/x/crypto/chacha20"
	"golang.org/x/crypto/chacha20poly1305"
)

// golang.org/x/crypto's implementations. Its ChaCha20 is portable Go; its
// ChaCha20-Poly1305 uses AVX2 assembly on amd64 when present.

func init() {
	register(&Implementation{name: "xcrypto", cipher: ChaCha20, priority: 10, available: true, newStream: xcryptoChaCha20})
	register(&Implementation{name: "xcrypto", cipher: ChaCha20Poly1305, priority: 10, available: true, newAEAD: chacha20poly1305.New})
	register(&Implementation{name: "xcrypto", cipher: XChaCha20Poly1305, priority: 10, available: true, newAEAD: chacha20poly1305.NewX})
}

// xcryptoChaCha20 takes OpenSSL's 16-byte IV: a little-endian block counter,
// then the 12-byte nonce.
func xcryptoChaCha20(key, iv []byte) (cipher.Stream, error) {
	s, err := chacha20.NewUnauthenticatedCipher(key, iv[4:])
	if err != nil {
		return nil, err
	}
	s.SetCounter(binary.LittleEndian.Uint32(iv[:4]))
	return s, nil
}
