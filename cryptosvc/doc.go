// Package cryptosvc is the embeddable core of cipherd: named, versioned keys,
// and the sealed format that encrypts data under them. It has no HTTP in it;
// the server package puts it on the network, and a Go program can use it
// directly.
//
// # Pieces
//
// A [Service], made by [New] from a [Config], does everything: one-shot
// [Service.Seal] and [Service.Open]; streams with [Service.EncryptWriter],
// [Service.DecryptReader] and, for random access, [Service.DecryptReaderAt];
// [Service.Rewrap] after a rotation; data keys for the caller's own use with
// [Service.NewDataKey]; and key management ([Service.CreateKey],
// [Service.ImportKey], [Service.RotateKey], [Service.ConfigureKey],
// [Service.DeleteKey], [Service.RotateDue]) and its lifecycle (a deletion
// scheduled ahead and cancelled, [Service.ScheduleKeyDeletion],
// [Service.CancelKeyDeletion], [Service.DeleteDue]; versions disabled and
// enabled, [Service.DisableKeyVersion]; retired versions destroyed,
// [Service.TrimKey]). It is safe for concurrent use.
//
// Keys live in a [Keystore]. A key is a name and versions 1, 2, 3, … each
// holding a 32-byte [Secret]; rotation adds a version, and older versions keep
// opening what they sealed until a minimum decryption version retires them,
// and a trim may then destroy them.
// Four keystores are provided, and one conformance suite runs against them
// all:
//
//   - the file keystore ([OpenFileStore]): one directory, held by one
//     process, every key encrypted at rest under a storage key that the
//     root key wraps, written atomically. It keeps a development root key
//     next to the keys when given none ([FileStoreConfig].DevRootKey).
//   - the keyring file ([OpenKeyring]): a read-only JSON file, typically a
//     mounted Kubernetes Secret, in the clear or sealed under a root key
//     ([WriteSealedKeyring]), reloaded when it changes.
//   - the PostgreSQL keystore (package cryptosvc/pgstore): one database that
//     many replicas share, records sealed under a storage key that the root
//     key wraps; changes reach every replica through LISTEN/NOTIFY, and a
//     version a replica has not heard of is read through on a miss.
//   - [MemStore]: in memory, for tests and for programs that manage keys
//     themselves.
//
// Anything else, such as an external KMS, can implement [Keystore].
//
// # The root of trust
//
// A [RootKeyProvider] wraps and unwraps the storage key under which the file
// keystore, a sealed keyring and the PostgreSQL keystore seal their records
// ([Sealer]). Providers:
//
//   - [StaticRootKey]: a root key in memory, read from a file or an
//     environment variable ([LoadRootKey], [ParseRootKey]), or the file
//     keystore's development root key.
//   - PKCS#11 (package cryptosvc/pkcs11): an AES-256 key in a token, named by
//     an RFC 7512 URI; the root key never leaves the token.
//
// Rotating the root key re-seals every record under a new storage key,
// resumably ([FileStore.RotateRootKey]; pgstore.RotateRootKey re-wraps the
// database's storage key). Package cryptosvc/rootkey opens a provider by
// the name cipherd's settings give it and serves a running file keystore's
// online rotation; package cryptosvc/keystore opens the store those
// settings name. A program that embeds the service opens its store and
// provider itself, with these packages or directly, and closes them after
// the service is done with them.
//
// # The sealed format
//
// Everything the Service encrypts is a sealed message: a header naming the
// AEAD, the key and the key version, followed by a body that is a standard
// c2sp.org/chunked-encryption message with HKDF-Expand-SHA-512 (with AES-GCM,
// Cobblestone-128 and Cobblestone-256): 16 KiB chunks, a 24-byte salt and a
// 32-byte key commitment. The AEAD is
// AES-128-GCM, AES-256-GCM or ChaCha20-Poly1305, chosen per key or per host;
// any replica opens what any other sealed. One-shot messages use direct mode,
// whose body key is derived from the key version; streams use envelope mode,
// whose body key is a random data key wrapped in the header. The caller's
// context is the body's chunked-encryption context, verbatim, so whoever holds
// a body's input key can open it with an independent implementation.
// [ParseHeader] and [ReadHeader] decode headers. The normative specification
// is docs/FORMAT.md in the cipherd repository.
//
// # Guarantees
//
//   - Constant memory: [EncryptWriter] and [DecryptReader] hold one 16 KiB
//     chunk whatever the stream's length, and a [ReaderAt] reads and
//     authenticates only the chunks a read touches.
//   - Nothing unauthenticated: readers return plaintext only from chunks that
//     authenticated, and end a stream with io.EOF only after its final chunk
//     did. A truncated, extended, reordered or modified message is an error,
//     and a DecryptReader's errors are sticky.
//   - Header-only rewrap: [Service.Rewrap] moves a stream to a new key version
//     by rewriting its header; the body is returned unchanged, and the header
//     alone may be passed in.
//   - One error for authentication failures: a wrong key, a wrong context and
//     a modified byte all give [ErrAuthFailed], with the same message. Other
//     errors ([ErrTruncated], [ErrMalformed], [ErrKeyMismatch], …) depend only
//     on the message's length and header and on key metadata, never on a
//     secret. Use [errors.Is].
//   - Material never printed: a [Secret] formats as "Secret(REDACTED)" under
//     every fmt verb and refuses JSON, text and binary marshalling; the
//     Service logs key names and versions, never material, contexts or data.
//
// # References
//
//   - c2sp.org/chunked-encryption, Chunked encryption.
//     https://c2sp.org/chunked-encryption
//   - RFC 5869, HMAC-based Extract-and-Expand Key Derivation Function (HKDF).
//   - RFC 5116, An Interface and Algorithms for Authenticated Encryption.
//   - NIST SP 800-38D, Recommendation for Block Cipher Modes of Operation:
//     Galois/Counter Mode (GCM) and GMAC.
//   - RFC 8439, ChaCha20 and Poly1305 for IETF Protocols.
//   - IANA, Authenticated Encryption with Associated Data (AEAD) Parameters.
//     https://www.iana.org/assignments/aead-parameters
//   - RFC 7512, The PKCS #11 URI Scheme.
//   - docs/FORMAT.md, The cipherd sealed format, version 1.
//   - docs/STORAGE.md, The storage formats of the keystores.
package cryptosvc
