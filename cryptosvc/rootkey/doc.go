// Package rootkey opens cipherd's root-key providers by the names its
// settings give them, and serves the online rotation of a file keystore's
// root key.
//
// # Naming a root key
//
// A root key is named by a URI, by a file, or by the environment:
//
//   - "pkcs11:…" (RFC 7512) is a key in a PKCS#11 token (package
//     cryptosvc/pkcs11); it never leaves the token.
//   - "file:<path>", or a file given alone, holds a static root key: 32
//     bytes as base64 or hex (cryptosvc.LoadRootKey).
//   - CIPHERD_ROOT_KEY (cryptosvc.EnvRootKey) holds a static root key
//     itself.
//
// [Open] takes the first of Config.URI, Config.File and CIPHERD_ROOT_KEY
// that is set, and returns nil when none is: the caller then decides
// whether a development root key will do (the file keystore keeps one in
// its directory) or none is an error (a shared store). [OpenURI] opens a
// URI alone, as rotation targets are given. [Close] releases what a
// provider holds (a PKCS#11 session).
//
// # Online rotation
//
// A running server holds its file keystore's directory lock, so another
// process cannot rotate the store's root key itself. It asks instead
// ([RequestRotation]): it writes rotate.request into the directory,
// {"v":1,"to":"<URI>"}. The process holding the store runs [Watch], which
// polls for the request every second, opens that provider (with its own
// environment and files: a PIN source must be readable by it), rotates the
// store while it keeps serving, and answers in rotate.result,
// {"v":1,"to":"<URI without PIN source>","generation":n} or
// {…,"error":"…"}, then removes the request. Data operations never wait
// for a rotation; key creation and rotation wait for it to end.
//
// # References
//
//   - RFC 7512, The PKCS #11 URI Scheme.
//   - docs/OPERATIONS.md, Root of trust, in the cipherd repository.
package rootkey
