// Package selftest decides, at start-up, which cipher implementations cipherd
// may use and which are fastest on this host.
//
// It runs in three steps:
//
//  1. Known answers ([RunKATs]): every available implementation of every cipher
//     computes published test vectors. An implementation that gets one wrong
//     is disabled and reported; a cipher with no passing implementation is
//     off; if nothing passes, the process must refuse to start ([KATReport.Err]).
//  2. Speed ([Speed]): the `openssl speed` benchmark, with its semantics
//     (fixed wall-clock time per cell, per-message operations, -multi workers)
//     and its output formats (the text table and the -mr lines), plus JSON and
//     a side-by-side run of the host's openssl ([CompareOpenSSL]).
//  3. Selection ([Select]): a quick profile of the AEADs (median of short
//     trials, well under a second), the fastest implementation of each cipher,
//     and the AEAD for new data, chosen by speed with a margin and an order of
//     preference. The profile is cached on disk per CPU, binary and GOMAXPROCS.
//
// References:
//   - NIST SP 800-38A, Appendix F (CBC and CTR example vectors).
//   - D. McGrew and J. Viega, The Galois/Counter Mode of Operation (GCM), test cases.
//   - RFC 8439, ChaCha20 and Poly1305 for IETF Protocols, §2 and Appendix A.
//   - draft-irtf-cfrg-xchacha-03, Appendix A.3.
//   - RFC 5869, HMAC-based Extract-and-Expand Key Derivation Function (HKDF), Appendix A.
//   - FIPS 197, Advanced Encryption Standard, Appendix C.
//   - OpenSSL apps/speed.c (3.0): the benchmark's semantics and output formats.
package selftest
