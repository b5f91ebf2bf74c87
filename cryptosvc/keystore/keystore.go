package keystore

import (
	"context"
	"fmt"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/cryptosvc/pgstore"
	"github.com/cipherd/cipherd/cryptosvc/rootkey"
)

// Config names a keystore and its root key as cipherd's settings do. Its
// zero value is the file keystore in ./keys with the development root key
// (unless CIPHERD_ROOT_KEY is set).
type Config struct {
	// DataDir holds the file keystore, in DataDir/keys, when neither
	// Postgres nor Keyring is set. cipherd's data_dir.
	DataDir string
	// Keyring, when set, is a read-only keyring file, sealed under the
	// root key or in the clear. cipherd's keyring.
	Keyring string
	// Postgres, when set, is the URL of a PostgreSQL keystore
	// (postgres://…, libpq conventions), which needs a root key: it has no
	// development key. cipherd's keystore.
	Postgres string
	// Logger is given to the store: warnings (the development root key, a
	// database out of reach), never material. nil means no logging.
	Logger *zap.Logger
	// RootKey names the root key (rootkey.Open). None at all means the
	// development root key of the file keystore, which it keeps next to
	// the keys and warns about at every open.
	RootKey rootkey.Config
}

// FileStoreDir is the file keystore's directory, DataDir/keys.
func (c *Config) FileStoreDir() string { return filepath.Join(c.DataDir, "keys") }

// Store is a keystore Open opened, with the root-key provider it was
// opened with.
type Store struct {
	// Keystore is the open store, to hand to cryptosvc.New or
	// server.Config.Keystore. Store.Close closes it. (Store does not embed
	// it: its own optional interfaces, such as cryptosvc.HealthReporter,
	// must reach whoever is handed it.)
	Keystore cryptosvc.Keystore

	root cryptosvc.RootKeyProvider // nil for the development key, or a keyring in the clear
	file *cryptosvc.FileStore      // the file keystore, nil for the others
	dir  string                    // the file keystore's directory

	stopWatch context.CancelFunc             // nil until WatchRotation
	watchDone chan cryptosvc.RootKeyProvider // the provider rootkey.Watch ends with
}

// Open opens the keystore cfg names: the PostgreSQL keystore, the
// read-only keyring, or the file keystore, with the root key cfg names
// (the development one for the file keystore when it names none). The
// caller closes the store with Close.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	p, err := rootkey.Open(ctx, cfg.RootKey)
	if err != nil {
		return nil, fmt.Errorf("root key: %w", err)
	}
	s := &Store{root: p}
	switch {
	case cfg.Postgres != "":
		if p == nil {
			return nil, fmt.Errorf("the PostgreSQL keystore needs a root key: %w: give root_key_uri, root_key_file or %s", cryptosvc.ErrRootKey, cryptosvc.EnvRootKey)
		}
		s.Keystore, err = pgstore.Open(ctx, pgstore.Config{DSN: cfg.Postgres, RootKeyProvider: p, Logger: cfg.Logger})
		if err != nil {
			err = fmt.Errorf("keystore: %w", err)
		}
	case cfg.Keyring != "":
		// With the root key when one is named, so that a sealed keyring
		// opens.
		s.Keystore, err = cryptosvc.OpenKeyring(cfg.Keyring, cryptosvc.KeyringConfig{Logger: cfg.Logger, RootKeyProvider: p})
		if err != nil {
			err = fmt.Errorf("keyring: %w", err)
		}
	default:
		s.dir = cfg.FileStoreDir()
		s.file, err = cryptosvc.OpenFileStore(s.dir, cryptosvc.FileStoreConfig{Logger: cfg.Logger, RootKeyProvider: p, DevRootKey: p == nil})
		if err != nil {
			err = fmt.Errorf("keystore: %w", err)
		} else {
			s.Keystore = s.file
		}
	}
	if err != nil {
		rootkey.Close(p)
		return nil, err
	}
	return s, nil
}

// FileStore returns the file keystore, or nil when the store is another.
func (s *Store) FileStore() *cryptosvc.FileStore { return s.file }

// WatchRotation serves online root-key rotation requests for the file
// keystore (rootkey.Watch) in the background until Close; the other stores
// have none, and a second call does nothing. log receives the rotations'
// progress; nil means no logging.
func (s *Store) WatchRotation(log *zap.Logger) {
	if s.file == nil || s.stopWatch != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopWatch = cancel
	s.watchDone = make(chan cryptosvc.RootKeyProvider, 1)
	root := s.root
	s.root = nil // rootkey.Watch owns it until it ends
	go func() { s.watchDone <- rootkey.Watch(ctx, s.file, s.dir, root, log) }()
}

// Close stops the rotation watcher and waits for it (a rotation it cuts
// short is finished by asking again: the store opens with either root key
// meanwhile), then closes the store, then its root-key provider. Close the
// store only once whatever was handed it (a server: after its Shutdown)
// has stopped using it.
func (s *Store) Close() error {
	if s.stopWatch != nil {
		s.stopWatch()
		s.root = <-s.watchDone
		s.stopWatch = nil
	}
	err := s.Keystore.Close()
	rootkey.Close(s.root)
	s.root = nil
	return err
}
