// Package kernels holds cipherd's cipher implementations behind one registry.
//
// Every cipher (AES-GCM, AES-CTR, ChaCha20, ChaCha20-Poly1305, XChaCha20-Poly1305,
// and, for benchmark parity only, AES-CBC and AES-IGE) has one or more
// implementations: Go's standard library, golang.org/x/crypto, portable Go written
// here, and the project's own assembly for amd64 (VAES and VPCLMULQDQ over 512- and
// 256-bit vectors for AES-GCM and AES-CTR, AVX-512 and AVX2 for ChaCha20, AVX-512
// IFMA and MULX for Poly1305), generated with avo from the programs in _asm/ and
// removed by the purego build tag. Beside the ciphers, [SHA512x4] runs four
// SHA-512 compressions in the lanes of AVX2 registers, for the sealed format's
// per-message key derivation. [Implementations] returns all of them
// in order of preference; each reports whether this host can run it
// ([Implementation.Available], decided once at start-up in cpu.go) and constructs
// ciphers bound to that one code path, so the self-test and the benchmark can
// exercise every path without flipping global switches.
//
// Constructors return the interfaces of crypto/cipher and honour their contracts
// exactly: Seal and Open append to dst, exact in-place operation is allowed, any
// other overlap panics, and a failed Open returns one opaque error.
//
// The CPU features the kernels depend on are read once, through
// github.com/klauspost/cpuid, and can be switched off with the same GODEBUG
// settings the Go runtime honours (GODEBUG=cpu.aes=off,cpu.avx2=off,…), so one
// knob turns off hardware paths in the standard library and here alike. An
// assembly implementation names the features it needs as avo spells them in
// the generated code's "// Requires:" lines, and a test holds the two to each
// other.
//
// References:
//   - NIST SP 800-38A, Recommendation for Block Cipher Modes of Operation (CBC, CTR).
//   - NIST SP 800-38D, Galois/Counter Mode (GCM) and GMAC.
//   - RFC 8439, ChaCha20 and Poly1305 for IETF Protocols.
//   - draft-irtf-cfrg-xchacha, XChaCha: eXtended-nonce ChaCha and AEAD_XChaCha20_Poly1305.
//   - S. Gueron and M. Kounavis, Intel Carry-Less Multiplication Instruction and its
//     Usage for Computing the GCM Mode (2010), for GHASH with carry-less multiplication.
//   - N. Drucker, S. Gueron and V. Krasnov, Making AES Great Again: The Forthcoming
//     Vectorized AES Instruction (2018), for VAES and VPCLMULQDQ over wide vectors.
//   - D. J. Bernstein, ChaCha, a variant of Salsa20 (2008), and The Poly1305-AES
//     message-authentication code (2005).
//   - C. Campbell, Design and Specification of Cryptographic Capabilities (1978), and
//     OpenSSL's AES_ige_encrypt, for the Infinite Garble Extension (IGE) mode.
package kernels
