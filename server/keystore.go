package server

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/cryptosvc/pgstore"
	"github.com/cipherd/cipherd/cryptosvc/rootkey"
)

// openKeystore opens the read-only keyring, the PostgreSQL keystore, or the
// file keystore with the configured root key (or a development one,
// loudly).
func (s *Server) openKeystore(ctx context.Context) error {
	if s.cfg.Keystore != "" {
		// The root-key provider of root_key_uri, root_key_file or
		// CIPHERD_ROOT_KEY; a shared store has no development key.
		p, err := rootkey.Open(ctx, s.rootKeyConfig())
		if err == nil && p == nil {
			err = fmt.Errorf("%w: give root_key_uri, root_key_file or %s", cryptosvc.ErrRootKey, cryptosvc.EnvRootKey)
		}
		if err != nil {
			return fmt.Errorf("server: the PostgreSQL keystore needs a root key: %w", err)
		}
		st, err := pgstore.Open(ctx, pgstore.Config{DSN: s.cfg.Keystore, RootKeyProvider: p, Logger: s.log})
		if err != nil {
			rootkey.Close(p)
			return fmt.Errorf("server: keystore: %w", err)
		}
		s.rk.p = p // closed at shutdown
		s.store = st
		return nil
	}
	if s.cfg.Keyring != "" {
		kr, err := s.openKeyring(context.Background(), s.cfg.Keyring)
		if err != nil {
			return fmt.Errorf("server: keyring: %w", err)
		}
		s.store = kr
		return nil
	}
	fs, err := s.openFileStore(context.Background(), filepath.Join(s.cfg.DataDir, "keys"))
	if err != nil {
		return fmt.Errorf("server: keystore: %w", err)
	}
	s.store = fs
	return nil
}

func (s *Server) rootKeyConfig() rootkey.Config {
	return rootkey.Config{URI: s.cfg.RootKeyURI, File: s.cfg.RootKeyFile}
}

// rootKeyState is the provider of the keystore's storage key.
type rootKeyState struct {
	mu sync.Mutex
	p  cryptosvc.RootKeyProvider // nil for the development key
}

// close releases the provider.
func (r *rootKeyState) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	rootkey.Close(r.p)
	r.p = nil
}

// watchRotation serves rotation requests for the file keystore fs until
// ctx ends (rootkey.Watch), and keeps the provider it ends with.
func (s *Server) watchRotation(ctx context.Context, fs *cryptosvc.FileStore, dir string) {
	s.rk.mu.Lock()
	p := s.rk.p
	s.rk.mu.Unlock()
	p = rootkey.Watch(ctx, fs, dir, p, s.log)
	s.rk.mu.Lock()
	s.rk.p = p
	s.rk.mu.Unlock()
}

// openFileStore opens the file keystore in dir with the configured root
// key.
func (s *Server) openFileStore(ctx context.Context, dir string) (*cryptosvc.FileStore, error) {
	p, err := rootkey.Open(ctx, s.rootKeyConfig())
	if err != nil {
		return nil, err
	}
	fc := cryptosvc.FileStoreConfig{Logger: s.log, RootKeyProvider: p, DevRootKey: p == nil}
	fs, err := cryptosvc.OpenFileStore(dir, fc)
	if err != nil {
		rootkey.Close(p)
		return nil, err
	}
	s.rk.p = p
	return fs, nil
}

// openKeyring opens the read-only keyring file at path, with the configured
// root key if there is one, so that a sealed keyring opens.
func (s *Server) openKeyring(ctx context.Context, path string) (*cryptosvc.Keyring, error) {
	p, err := rootkey.Open(ctx, s.rootKeyConfig())
	if err != nil {
		return nil, err
	}
	kr, err := cryptosvc.OpenKeyring(path, cryptosvc.KeyringConfig{Logger: s.log, RootKeyProvider: p})
	if err != nil {
		rootkey.Close(p)
		return nil, err
	}
	s.rk.p = p
	return kr, nil
}
