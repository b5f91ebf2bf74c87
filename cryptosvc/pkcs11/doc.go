// Package pkcs11 is cipherd's PKCS#11 root-key provider: the root key is
// an AES-256 key in a token (an HSM, a cloud HSM, SoftHSM2), generated
// there sensitive and non-extractable, and the token encrypts and decrypts
// the keystore's storage key with CKM_AES_GCM. The root key never leaves
// the token; the storage key it wraps is in this process, as it must be to
// seal records.
//
// A provider is named by an RFC 7512 URI (package internal/pkcs11uri):
//
//	pkcs11:token=cipherd;object=cipherd-root?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/run/secrets/pin
//
// The wrapped form of a key is the 12-byte IV followed by the AES-256-GCM
// ciphertext and 16-byte tag (60 bytes for a 32-byte key); the caller's
// additional data is GCM's AAD. The IV is random, drawn in this process:
// a root key wraps one storage key per rotation, far from GCM's 2³² bound
// for random IVs. A token that writes its own IV (CloudHSM does) is read
// back through the mechanism parameters.
//
// CKM_AES_GCM with C_Encrypt is used rather than C_WrapKey with
// CKM_AES_KEY_WRAP_KWP: the storage key is not a token object, GCM binds
// the additional data (the storage key's generation), and SoftHSM2 2.6
// offers KWP only for C_WrapKey on token objects.
//
// Loading a module needs cgo. The binding is github.com/miekg/pkcs11: the
// maintained, widely used one (ThalesGroup/crypto11 is built on it), thin
// enough that this package sees every CK_RV it needs to tell a wrong tag
// from a lost token. crypto11's layer (crypto.Signer, its own session
// pool and configuration) would add nothing this provider uses, and no
// binding without cgo that loads a module is well kept. A build without
// cgo (CGO_ENABLED=0, the static image) has this package, and its Open
// fails with ErrNoCgo.
//
// References:
//   - PKCS #11 Cryptographic Token Interface Base Specification 3.0 (OASIS)
//   - RFC 7512, The PKCS #11 URI Scheme
//   - NIST SP 800-38D, GCM (random IVs: section 8.2.2)
package pkcs11

import "errors"

// ErrNoCgo: this build cannot load a PKCS#11 module.
var ErrNoCgo = errors.New("pkcs11: this cipherd was built without cgo (CGO_ENABLED=0) and cannot load a PKCS#11 module: build with CGO_ENABLED=1, or use the image target with PKCS#11 (docker build --target pkcs11)")

// ErrUnreachable is wrapped by the errors of a token that cannot be
// reached: the module, slot or session failed, as opposed to a wrong PIN,
// a missing key or a wrapped key that does not authenticate.
var ErrUnreachable = errors.New("pkcs11: token unreachable")
