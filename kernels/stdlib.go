package kernels

import (
	"crypto/aes"
	"crypto/cipher"
)

// The standard library's implementations. crypto/aes dispatches internally to
// AES-NI and PCLMULQDQ (or the ARMv8 equivalents) when present, and to portable
// Go under the purego build tag or GODEBUG=cpu.aes=off.

func init() {
	for _, c := range []Cipher{AES128GCM, AES256GCM} {
		register(&Implementation{name: "stdlib", cipher: c, priority: 10, available: true, newAEAD: stdlibGCM})
	}
	for _, c := range []Cipher{AES128CTR, AES256CTR} {
		register(&Implementation{name: "stdlib", cipher: c, priority: 10, available: true, newStream: stdlibCTR})
	}
	for _, c := range []Cipher{AES128CBC, AES256CBC} {
		register(&Implementation{name: "stdlib", cipher: c, priority: 10, available: true, newMode: stdlibCBC})
	}
}

func stdlibGCM(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

func stdlibCTR(key, iv []byte) (cipher.Stream, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewCTR(b, iv), nil
}

func stdlibCBC(key, iv []byte, decrypt bool) (cipher.BlockMode, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	if decrypt {
		return cipher.NewCBCDecrypter(b, iv), nil
	}
	return cipher.NewCBCEncrypter(b, iv), nil
}
