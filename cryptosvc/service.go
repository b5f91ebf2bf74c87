package cryptosvc

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/cipherd/cipherd/kernels"
)

// Config configures a Service.
type Config struct {
	// Keystore holds the keys. Required.
	Keystore Keystore

	// AEAD seals new data under keys that do not pin one (normally the
	// start-up selection's choice). Zero means AES-256-GCM.
	AEAD kernels.Cipher

	// Implementation returns the implementation to use for an AEAD (normally
	// the start-up selection's). Nil means each cipher's preferred available
	// implementation. Returning nil turns the AEAD off on this host.
	Implementation func(kernels.Cipher) *kernels.Implementation

	// SizeClasses returns the implementations of an AEAD for one-shot
	// messages by size, smallest first (normally the start-up selection's):
	// Seal and Open of n bytes use the first class whose MaxSize is at least
	// n, and Implementation's past the last, as streams always do. Nil, or
	// nil for an AEAD, means Implementation's at every size.
	SizeClasses func(kernels.Cipher) []SizeClass

	// Rand is the source of salts and data keys. Nil means crypto/rand.Reader.
	Rand io.Reader

	// Logger records key lifecycle events (names and versions only). Nil
	// means no logging.
	Logger *zap.Logger

	// Now returns the current time. Nil means time.Now.
	Now func() time.Time

	// MinRotationPeriod is the shortest rotation_period a key may be
	// given; a key stored with a shorter one rotates at this period.
	// Every rotation adds a version that is kept until retired, so a
	// period of seconds would grow every key without bound. Zero means
	// DefaultMinRotationPeriod; tests and operators who mean it set less.
	MinRotationPeriod time.Duration

	// BackupKey, when set, seals key backups that another fleet, under
	// another root key, restores when given the same backup key
	// (BackupKey, RestoreKey). It is copied. nil means backups are sealed
	// under the keystore's root key only.
	BackupKey *Secret
}

// DefaultMinRotationPeriod is Config.MinRotationPeriod's default.
const DefaultMinRotationPeriod = time.Hour

// Info describes a sealed message: the key and version it is under and its AEAD.
type Info struct {
	Key     string         `json:"key"`
	Version uint32         `json:"key_version"`
	AEAD    kernels.Cipher `json:"-"`
	Mode    Mode           `json:"-"`
}

// Service is the embeddable core of cipherd: named, versioned keys and the
// sealed format, with no HTTP in it. It is safe for concurrent use.
type Service struct {
	store Keystore
	aead  kernels.Cipher
	impls [len(aeadIDs)]*kernels.Implementation // by AEAD ID; nil: off on this host
	rand  io.Reader
	log   *zap.Logger
	now   func() time.Time

	minRotation time.Duration // Config.MinRotationPeriod

	// classes are the one-shot size classes by AEAD ID (sizeclass.go).
	classes [len(aeadIDs)][]SizeClass

	admin sync.Mutex // serialises this process's key writes (see modifyKey)

	cacheMu sync.RWMutex
	cache   map[versionRef]*versionKeys

	usage usageTable // usage per key version (usage.go)

	backupKey *Secret // Config.BackupKey's copy, or nil

	// readLog paces the lines logReadThrough writes; readUnlogged counts
	// those it left out since the last.
	readLog      *rate.Limiter
	readUnlogged atomic.Int64
}

// Read-throughs are logged at most readLogBurst at once and readLogRate a
// second after that: a caller sending headers that name versions no
// replica has would otherwise write a line per request.
const (
	readLogRate  = 1
	readLogBurst = 10
)

type versionRef struct {
	name    string
	version uint32
}

// maxCachedVersions bounds the derived-key cache; past it the cache restarts.
const maxCachedVersions = 1 << 14

// New returns a Service. It first checks every implementation it will use
// against the sealed format's known answers (SelfTest, once per
// implementation in a process) and fails with ErrSelfTest if one is wrong.
func New(cfg Config) (*Service, error) {
	if cfg.Keystore == nil {
		return nil, fmt.Errorf("%w: Config.Keystore is required", ErrInvalidConfig)
	}
	s := &Service{
		store: cfg.Keystore,
		aead:  cfg.AEAD,
		rand:  cfg.Rand,
		log:   cfg.Logger,
		now:   cfg.Now,
		cache: make(map[versionRef]*versionKeys),

		readLog: rate.NewLimiter(readLogRate, readLogBurst),
	}
	if cfg.BackupKey != nil {
		var zero Secret
		if cfg.BackupKey.Equal(&zero) {
			return nil, fmt.Errorf("%w: Config.BackupKey is all zeros", ErrInvalidConfig)
		}
		bk := *cfg.BackupKey
		s.backupKey = &bk
	}
	if s.aead == 0 {
		s.aead = kernels.AES256GCM
	}
	if !slices.Contains(SealAEADs, s.aead) {
		return nil, fmt.Errorf("%w: %s is not an AEAD of the sealed format", ErrInvalidConfig, s.aead)
	}
	for _, c := range SealAEADs {
		var im *kernels.Implementation
		if cfg.Implementation != nil {
			im = cfg.Implementation(c)
		} else if av := kernels.Available(c); len(av) > 0 {
			im = av[0]
		}
		if im != nil && (im.Cipher() != c || !im.Available()) {
			return nil, fmt.Errorf("%w: Config.Implementation(%s) returned %s", ErrInvalidConfig, c, im)
		}
		if im != nil {
			if err := selfTestOnce(im); err != nil {
				return nil, err
			}
		}
		s.impls[aeadID(c)] = im
		if im != nil && cfg.SizeClasses != nil {
			classes, err := sizeClasses(c, cfg.SizeClasses(c))
			if err != nil {
				return nil, err
			}
			s.classes[aeadID(c)] = classes
		}
	}
	if s.impls[aeadID(s.aead)] == nil {
		return nil, fmt.Errorf("%w: no implementation of %s", ErrUnsupported, s.aead)
	}
	if s.rand == nil {
		s.rand = rand.Reader
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.now == nil {
		s.now = time.Now
	}
	switch {
	case cfg.MinRotationPeriod < 0:
		return nil, fmt.Errorf("%w: Config.MinRotationPeriod is negative", ErrInvalidConfig)
	case cfg.MinRotationPeriod == 0:
		s.minRotation = DefaultMinRotationPeriod
	default:
		s.minRotation = cfg.MinRotationPeriod
	}
	return s, nil
}

// implementation returns the implementation of c, or ErrUnsupported.
func (s *Service) implementation(c kernels.Cipher) (*kernels.Implementation, error) {
	if im := s.impls[aeadID(c)]; im != nil {
		return im, nil
	}
	return nil, fmt.Errorf("%w: no usable implementation of %s on this host", ErrUnsupported, c)
}

// versionKeys returns the derived keys of a version, from the cache when the
// secret is unchanged.
func (s *Service) versionKeys(name string, v *StoredVersion) *versionKeys {
	ref := versionRef{name, v.Version}
	s.cacheMu.RLock()
	vk := s.cache[ref]
	s.cacheMu.RUnlock()
	if vk != nil && vk.secret.Equal(&v.Secret) {
		return vk
	}
	vk = deriveVersionKeys(&v.Secret, name, v.Version)
	vk.use = s.usage.counts(ref)
	s.cacheMu.Lock()
	if len(s.cache) >= maxCachedVersions {
		clear(s.cache)
	}
	s.cache[ref] = vk
	s.cacheMu.Unlock()
	return vk
}

// sealAEAD returns the AEAD that seals new data under k.
func (s *Service) sealAEAD(k *StoredKey) (kernels.Cipher, error) {
	if k.Config.AEAD != "" {
		return ParseAEAD(k.Config.AEAD)
	}
	allowed := k.Config.AllowedAEADs
	if len(allowed) == 0 || k.Config.allows(s.aead) {
		return s.aead, nil
	}
	for _, name := range allowed {
		if c, err := ParseAEAD(name); err == nil && s.impls[aeadID(c)] != nil {
			return c, nil
		}
	}
	return 0, fmt.Errorf("%w: none of key %s's allowed AEADs is usable here", ErrUnsupported, k.Name)
}

// key returns the key named name from the store's memory or, when memory
// has none, reads it through (Keystore.Refresh): a key created on another
// replica moments ago may not have reached this one yet, and must serve
// at once. Keys in memory cost no read.
func (s *Service) key(ctx context.Context, name string) (*StoredKey, error) {
	k, err := s.store.Get(ctx, name)
	if errors.Is(err, ErrKeyNotFound) {
		return s.readThrough(ctx, name, func(*StoredKey) bool { return true })
	}
	return k, err
}

// readThrough reads the key named name through the store's memory
// (Keystore.Refresh) for a caller that needs has(k) of it. A read that
// fails, the database gone as it started, does not undo what memory
// gained while the caller waited for it: a read already running when the
// caller missed (a shared store makes a caller that arrives during one
// wait for the next, which may be the one that fails), a notification, a
// write. If memory has what the caller needs by then, that serves, as
// every key in memory does while the database is down
// (pgstore.TestFailedReadKeepsServingWhatMemoryGained).
func (s *Service) readThrough(ctx context.Context, name string, has func(*StoredKey) bool) (*StoredKey, error) {
	k, err := s.store.Refresh(ctx, name, has)
	if err != nil {
		if m, merr := s.store.Get(ctx, name); merr == nil && has(m) {
			return m, nil
		}
	}
	return k, err
}

// sealTarget resolves the key to seal new data under: its latest version,
// the AEAD, its implementation and the derived keys.
func (s *Service) sealTarget(ctx context.Context, name string) (Header, *kernels.Implementation, *versionKeys, error) {
	k, err := s.key(ctx, name)
	if err != nil {
		return Header{}, nil, nil, err
	}
	v, err := k.sealVersion()
	if err != nil {
		return Header{}, nil, nil, err
	}
	c, err := s.sealAEAD(k)
	if err != nil {
		return Header{}, nil, nil, err
	}
	im, err := s.implementation(c)
	if err != nil {
		return Header{}, nil, nil, err
	}
	return Header{AEAD: c, KeyName: k.Name, KeyVersion: v.Version}, im, s.versionKeys(k.Name, v), nil
}

// openTarget resolves the key version a header names, checking it against
// the key the caller expects ("" accepts the key the header names).
func (s *Service) openTarget(ctx context.Context, name string, h *Header) (*kernels.Implementation, *versionKeys, error) {
	if name != "" && name != h.KeyName {
		return nil, nil, ErrKeyMismatch
	}
	k, err := s.store.Get(ctx, h.KeyName)
	if err == nil && k.Version(h.KeyVersion) == nil && h.KeyVersion >= k.firstVersion() || errors.Is(err, ErrKeyNotFound) {
		// A version (or a key) another replica made moments ago may not
		// have reached this one's memory yet: read it through. Rare once
		// the replicas agree, so each read says what memory held. A
		// version below the key's first was destroyed: no read brings
		// it back.
		s.logReadThrough(h, k)
		k, err = s.readThrough(ctx, h.KeyName, func(k *StoredKey) bool { return k.Version(h.KeyVersion) != nil })
	}
	if err != nil {
		return nil, nil, err
	}
	if err := k.pending(); err != nil {
		return nil, nil, err
	}
	v, err := k.held(h.KeyVersion)
	if err != nil {
		return nil, nil, err
	}
	if h.KeyVersion < k.Config.MinDecryptionVersion {
		return nil, nil, fmt.Errorf("%w: key %s version %d is below the minimum %d", ErrVersionRetired, h.KeyName, h.KeyVersion, k.Config.MinDecryptionVersion)
	}
	if k.IsDisabled(h.KeyVersion) {
		return nil, nil, &VersionError{Key: k.Name, Version: h.KeyVersion, Err: ErrVersionDisabled}
	}
	im, err := s.implementation(h.AEAD)
	if err != nil {
		return nil, nil, err
	}
	return im, s.versionKeys(k.Name, v), nil
}

// logReadThrough logs that opening h's key version reads the keystore,
// with what memory held of the key (k, nil when none).
func (s *Service) logReadThrough(h *Header, k *StoredKey) {
	ce := s.log.Check(zap.InfoLevel, "key version not in memory: reading the keystore")
	if ce == nil {
		return
	}
	if !s.readLog.AllowN(s.now(), 1) {
		s.readUnlogged.Add(1)
		return
	}
	var latest uint32
	var rev uint64
	if k != nil {
		if v := k.Latest(); v != nil {
			latest = v.Version
		}
		rev = k.Revision
	}
	ce.Write(zap.String("key", h.KeyName), zap.Uint32("key_version", h.KeyVersion),
		zap.Uint32("memory_latest", latest), zap.Uint64("memory_revision", rev),
		zap.Int64("unlogged_before", s.readUnlogged.Swap(0)))
}

func infoOf(h *Header) Info {
	return Info{Key: h.KeyName, Version: h.KeyVersion, AEAD: h.AEAD, Mode: h.Mode}
}

// Seal encrypts plaintext under the latest version of key name, binding
// context (which Open must be given again). The result is self-describing:
// it names the key, the version and the AEAD.
func (s *Service) Seal(ctx context.Context, name string, plaintext, context []byte) ([]byte, Info, error) {
	h, im, vk, err := s.sealTarget(ctx, name)
	if err != nil {
		return nil, Info{}, err
	}
	im = s.forSize(h.AEAD, im, len(plaintext))
	size := headerFixed + len(h.KeyName) + 5 + chunkedPrefix + int(chunkedLen(int64(len(plaintext))))
	out, err := sealDirect(make([]byte, 0, size), s.rand, im, &h, vk, plaintext, context, true)
	if err != nil {
		return nil, Info{}, err
	}
	vk.use.sealed.Add(1)
	return out, infoOf(&h), nil
}

// Open decrypts a message made by Seal (or a whole stream made by
// EncryptWriter). name is the key the caller expects; "" accepts the key the
// ciphertext names. Every authentication failure is ErrAuthFailed.
func (s *Service) Open(ctx context.Context, name string, ciphertext, context []byte) ([]byte, Info, error) {
	h, n, err := ParseHeader(ciphertext)
	if err != nil {
		return nil, Info{}, err
	}
	im, vk, err := s.openTarget(ctx, name, &h)
	if err != nil {
		return nil, Info{}, err
	}
	im = s.forSize(h.AEAD, im, len(ciphertext)-n-chunkedPrefix-tagSize)
	input, err := bodyKey(im, &h, vk)
	if err != nil {
		return nil, Info{}, err
	}
	keys, chunks, err := openBody(im, input, ciphertext[n:], context)
	if err != nil {
		return nil, Info{}, err
	}
	pt, err := keys.openChunks(make([]byte, 0, max(len(chunks)-tagSize, 0)), chunks)
	keys.release()
	if err != nil {
		return nil, Info{}, err
	}
	vk.use.opened.Add(1)
	return pt, infoOf(&h), nil
}

// EncryptWriter returns a writer that seals what is written to it under the
// latest version of key name and writes the sealed stream to w, holding one
// 16 KiB chunk at a time. The header is written before EncryptWriter returns.
// The caller must Close the writer to complete the message.
func (s *Service) EncryptWriter(ctx context.Context, name string, w io.Writer, context []byte) (*EncryptWriter, error) {
	keys, start, info, err := s.startStream(ctx, name, context)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(start); err != nil {
		return nil, err
	}
	return newEncryptWriter(w, keys, info), nil
}

// startStream makes a new envelope-mode message under the latest version of
// key name: it returns the body's key state and the bytes that start the
// stream (header, salt and commitment).
func (s *Service) startStream(ctx context.Context, name string, context []byte) (*chunkedKeys, []byte, Info, error) {
	h, im, vk, err := s.sealTarget(ctx, name)
	if err != nil {
		return nil, nil, Info{}, err
	}
	input, err := newEnvelope(s.rand, im, &h, vk)
	if err != nil {
		return nil, nil, Info{}, err
	}
	start, err := h.AppendBinary(make([]byte, 0, maxHeaderSize+chunkedPrefix))
	if err != nil {
		return nil, nil, Info{}, err
	}
	keys, start, err := startBody(start, s.rand, im, input, context)
	if err != nil {
		return nil, nil, Info{}, err
	}
	vk.use.sealed.Add(1)
	return keys, start, infoOf(&h), nil
}

// DecryptReader reads the header and commitment of a sealed message from r
// and returns a reader of its plaintext. See DecryptReader for its guarantees.
func (s *Service) DecryptReader(ctx context.Context, name string, r io.Reader, context []byte) (*DecryptReader, error) {
	h, hdr, err := ReadHeader(r)
	if err != nil {
		return nil, err
	}
	keys, err := s.openStart(ctx, name, &h, context, readFullFrom(r))
	if err != nil {
		return nil, err
	}
	return newDecryptReader(r, keys, infoOf(&h), int64(len(hdr)+chunkedPrefix)), nil
}

// DecryptReaderAt returns random access to the plaintext of the sealed
// message of size bytes in r. Only the chunks a read touches are read and
// authenticated; the final chunk is authenticated at once, so the plaintext
// size is known and trustworthy.
func (s *Service) DecryptReaderAt(ctx context.Context, name string, r io.ReaderAt, size int64, context []byte) (*ReaderAt, error) {
	h, hdr, err := ReadHeader(io.NewSectionReader(r, 0, size))
	if err != nil {
		return nil, err
	}
	keys, err := s.openStart(ctx, name, &h, context, func(p []byte) error {
		_, err := r.ReadAt(p, int64(len(hdr)))
		if errors.Is(err, io.EOF) {
			return ErrTruncated
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return newReaderAt(r, int64(len(hdr)+chunkedPrefix), size, keys, infoOf(&h))
}

// readFullFrom returns a reader of exactly len(p) bytes from r, for
// openStart, that reports an input ending early as ErrTruncated.
func readFullFrom(r io.Reader) func([]byte) error {
	return func(p []byte) error {
		_, err := io.ReadFull(r, p)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return ErrTruncated
		}
		return err
	}
}

// openStart resolves the key version a header names, reads the body's salt
// and commitment with readPrefix, checks the commitment, and returns the
// body's key state.
func (s *Service) openStart(ctx context.Context, name string, h *Header, context []byte, readPrefix func([]byte) error) (*chunkedKeys, error) {
	im, vk, err := s.openTarget(ctx, name, h)
	if err != nil {
		return nil, err
	}
	input, err := bodyKey(im, h, vk)
	if err != nil {
		return nil, err
	}
	var prefix [chunkedPrefix]byte
	if err := readPrefix(prefix[:]); err != nil {
		return nil, err
	}
	keys, _, err := openBody(im, input, prefix[:], context)
	if err != nil {
		return nil, err
	}
	vk.use.opened.Add(1)
	return keys, nil
}

// Rewrap moves a ciphertext to the latest version of its key. A stream
// (envelope mode) is rewrapped by rewriting its header alone: ciphertext may
// be the header only, or the header followed by any part of the body, which
// is returned unchanged after the new header; context is not needed. A
// one-shot message is opened and sealed again, which needs its context.
func (s *Service) Rewrap(ctx context.Context, name string, ciphertext, context []byte) ([]byte, Info, error) {
	h, n, err := ParseHeader(ciphertext)
	if err != nil {
		return nil, Info{}, err
	}
	if h.Mode == ModeDirect {
		pt, _, err := s.Open(ctx, name, ciphertext, context)
		if err != nil {
			return nil, Info{}, err
		}
		defer clear(pt)
		return s.Seal(ctx, h.KeyName, pt, context)
	}
	im, vk, err := s.openTarget(ctx, name, &h)
	if err != nil {
		return nil, Info{}, err
	}
	var dk [32]byte
	defer clear(dk[:])
	key, err := openDataKey(im, &h, vk, &dk)
	if err != nil {
		return nil, Info{}, err
	}
	k, err := s.store.Get(ctx, h.KeyName)
	if err != nil {
		return nil, Info{}, err
	}
	latest, err := k.sealVersion()
	if err != nil {
		return nil, Info{}, err
	}
	nh := Header{AEAD: h.AEAD, KeyName: h.KeyName, KeyVersion: latest.Version}
	nvk := s.versionKeys(k.Name, latest)
	if err := wrapDataKey(s.rand, im, &nh, nvk, key); err != nil {
		return nil, Info{}, err
	}
	out, err := nh.AppendBinary(make([]byte, 0, maxHeaderSize+len(ciphertext)-n))
	if err != nil {
		return nil, Info{}, err
	}
	vk.use.opened.Add(1)
	nvk.use.sealed.Add(1)
	return append(out, ciphertext[n:]...), infoOf(&nh), nil
}

// DataKey is a fresh random key for the caller's own encryption, with a copy
// sealed under a cipherd key.
type DataKey struct {
	Plaintext []byte // nil when only the wrapped form was asked for
	Wrapped   []byte // a sealed message (Open returns Plaintext)
	Info      Info
}

// NewDataKey returns a random data key of size bytes (16, 24, 32 or 64)
// sealed under key name with context. With plaintext false, only the sealed
// copy is returned, so that a caller allowed to wrap need not see the key.
func (s *Service) NewDataKey(ctx context.Context, name string, size int, context []byte, plaintext bool) (DataKey, error) {
	switch size {
	case 16, 24, 32, 64:
	default:
		return DataKey{}, fmt.Errorf("%w: data key size must be 16, 24, 32 or 64 bytes", ErrInvalidConfig)
	}
	key := make([]byte, size)
	if _, err := io.ReadFull(s.rand, key); err != nil {
		return DataKey{}, fmt.Errorf("cryptosvc: reading randomness: %w", err)
	}
	wrapped, info, err := s.Seal(ctx, name, key, context)
	if err != nil {
		clear(key)
		return DataKey{}, err
	}
	if !plaintext {
		clear(key)
		key = nil
	}
	return DataKey{Plaintext: key, Wrapped: wrapped, Info: info}, nil
}
