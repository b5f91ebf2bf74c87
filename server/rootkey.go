package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/cryptosvc/pkcs11"
	"github.com/cipherd/cipherd/internal/atomicfile"
)

// The root of trust: which root-key provider wraps the file keystore's
// storage key, and how a running server learns of a rotation.
//
// root_key_uri (CIPHERD_ROOT_KEY_URI) names the provider: "pkcs11:…" (RFC
// 7512; package cryptosvc/pkcs11) or "file:<path>" (a static root key in a
// file). Without it, root_key_file or CIPHERD_ROOT_KEY give a static key,
// and with none of them the development key is used.
//
// A running server holds the keystore directory's lock, so `cipherd rootkey
// rotate` cannot rotate it itself: it writes rotate.request into the
// directory, {"v":1,"to":"<URI>"}; the server, which polls for it every
// rotationPoll, opens that provider (with its own environment and files:
// the PIN source must be readable by the server), rotates the store while
// serving, and answers in rotate.result, {"v":1,"to":"<URI without PIN
// source>","generation":n} or {…,"error":"…"}, then removes the request.
// Data operations never wait for a rotation; key creation and rotation wait
// for it to end.

// EnvRootKeyURI names the environment variable of Config.RootKeyURI.
const EnvRootKeyURI = "CIPHERD_ROOT_KEY_URI"

const (
	rotationRequest = "rotate.request"
	rotationResult  = "rotate.result"
	rotationPoll    = time.Second
)

// OpenRootKeyURI opens the provider uri names: "pkcs11:…" or
// "file:<path>".
func OpenRootKeyURI(ctx context.Context, uri string) (cryptosvc.RootKeyProvider, error) {
	switch {
	case strings.HasPrefix(uri, "pkcs11:"):
		p, err := pkcs11.Open(ctx, uri)
		if err != nil {
			return nil, err
		}
		return p, nil
	case strings.HasPrefix(uri, "file:"):
		path := strings.TrimPrefix(strings.TrimPrefix(uri, "file:"), "//")
		root, err := cryptosvc.LoadRootKey(path, "")
		if err != nil {
			return nil, err
		}
		return cryptosvc.NewStaticRootKey(&root, nil)
	}
	return nil, fmt.Errorf("%w: root key URI: give pkcs11:… or file:<path>", cryptosvc.ErrRootKey)
}

// OpenRootKey opens the provider cfg names (see above); nil, nil means the
// development key.
func OpenRootKey(ctx context.Context, cfg *Config) (cryptosvc.RootKeyProvider, error) {
	if cfg.RootKeyURI != "" {
		return OpenRootKeyURI(ctx, cfg.RootKeyURI)
	}
	if cfg.RootKeyFile == "" && os.Getenv(cryptosvc.EnvRootKey) == "" {
		return nil, nil
	}
	root, err := cryptosvc.LoadRootKey(cfg.RootKeyFile, cryptosvc.EnvRootKey)
	if err != nil {
		return nil, err
	}
	return cryptosvc.NewStaticRootKey(&root, nil)
}

// CloseRootKey releases what p holds (a PKCS#11 session), if anything.
func CloseRootKey(p cryptosvc.RootKeyProvider) {
	if c, ok := p.(io.Closer); ok && p != nil {
		c.Close()
	}
}

// rootKeyState is the provider of the file keystore's storage key.
type rootKeyState struct {
	mu sync.Mutex
	p  cryptosvc.RootKeyProvider // nil for the development key
}

// close releases the provider.
func (r *rootKeyState) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	CloseRootKey(r.p)
	r.p = nil
}

// openFileStore opens the file keystore in dir with the configured root
// key, and starts serving rotation requests for it until ctx ends.
func (s *Server) openFileStore(ctx context.Context, dir string) (*cryptosvc.FileStore, error) {
	p, err := OpenRootKey(ctx, &s.cfg)
	if err != nil {
		return nil, err
	}
	fc := cryptosvc.FileStoreConfig{Logger: s.log, RootKeyProvider: p, DevRootKey: p == nil}
	fs, err := cryptosvc.OpenFileStore(dir, fc)
	if err != nil {
		CloseRootKey(p)
		return nil, err
	}
	s.rk.p = p
	return fs, nil
}

// openKeyring opens the read-only keyring file at path, with the configured
// root key if there is one, so that a sealed keyring opens.
func (s *Server) openKeyring(ctx context.Context, path string) (*cryptosvc.Keyring, error) {
	p, err := OpenRootKey(ctx, &s.cfg)
	if err != nil {
		return nil, err
	}
	kr, err := cryptosvc.OpenKeyring(path, cryptosvc.KeyringConfig{Logger: s.log, RootKeyProvider: p})
	if err != nil {
		CloseRootKey(p)
		return nil, err
	}
	s.rk.p = p
	return kr, nil
}

// rotationMsg is rotate.request and rotate.result.
type rotationMsg struct {
	V          int    `json:"v"`
	To         string `json:"to"`
	Generation uint32 `json:"generation,omitempty"`
	Error      string `json:"error,omitempty"`
}

// watchRotation serves rotation requests for the file keystore until ctx
// ends.
func (s *Server) watchRotation(ctx context.Context, fs *cryptosvc.FileStore, dir string) {
	t := time.NewTicker(rotationPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		data, err := os.ReadFile(filepath.Join(dir, rotationRequest))
		if err != nil {
			continue
		}
		var req rotationMsg
		res := rotationMsg{V: 1}
		if err := json.Unmarshal(data, &req); err != nil || req.V != 1 || req.To == "" {
			res.Error = "rotate.request is not {\"v\":1,\"to\":\"<URI>\"}"
		} else {
			res.To, res.Generation, err = s.rotateRootKey(ctx, fs, req.To)
			if err != nil {
				res.Error = err.Error()
			}
		}
		b, _ := json.Marshal(&res)
		if err := atomicfile.Write(filepath.Join(dir, rotationResult), append(b, '\n'), ".tmp-"); err != nil {
			s.log.Error("root-key rotation: writing the result", zap.Error(err))
		}
		os.Remove(filepath.Join(dir, rotationRequest))
		atomicfile.SyncDir(dir)
	}
}

// rotateRootKey rotates the store to the provider uri names and, on
// success, makes it the server's.
func (s *Server) rotateRootKey(ctx context.Context, fs *cryptosvc.FileStore, uri string) (string, uint32, error) {
	p, err := OpenRootKeyURI(ctx, uri)
	if err != nil {
		s.log.Error("root-key rotation refused: the new root key does not open", zap.Error(err))
		return "", 0, err
	}
	s.log.Info("root-key rotation started", zap.String("to", p.String()))
	start := time.Now()
	if err := fs.RotateRootKey(ctx, p); err != nil {
		CloseRootKey(p)
		s.log.Error("root-key rotation failed; the store opens with either root key until it is finished", zap.String("to", p.String()), zap.Error(err))
		return p.String(), 0, err
	}
	s.rk.mu.Lock()
	old := s.rk.p
	s.rk.p = p
	s.rk.mu.Unlock()
	CloseRootKey(old)
	_, gen, _ := fs.RootKey()
	s.log.Warn("root key rotated: set root_key_uri to the new root key before the next start",
		zap.String("root_key", p.String()), zap.Uint32("storage_key_generation", gen), zap.Duration("took", time.Since(start)))
	return p.String(), gen, nil
}

// RequestRootKeyRotation asks the server that holds the file keystore in
// dir to rotate it to the root key uri names, and waits up to timeout for
// its answer. It returns the new provider's name and the storage key's
// generation.
func RequestRootKeyRotation(ctx context.Context, dir, uri string, timeout time.Duration) (string, uint32, error) {
	reqPath, resPath := filepath.Join(dir, rotationRequest), filepath.Join(dir, rotationResult)
	if _, err := os.Stat(reqPath); err == nil {
		return "", 0, fmt.Errorf("a rotation request is already waiting in %s", reqPath)
	}
	os.Remove(resPath)
	b, _ := json.Marshal(&rotationMsg{V: 1, To: uri})
	if err := atomicfile.Write(reqPath, append(b, '\n'), ".tmp-"); err != nil {
		return "", 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			os.Remove(reqPath)
			return "", 0, fmt.Errorf("no answer from the server holding %s within %v (is it a cipherd with the file keystore?)", dir, timeout)
		case <-t.C:
		}
		if _, err := os.Stat(reqPath); err == nil {
			continue
		}
		data, err := os.ReadFile(resPath)
		if err != nil {
			continue
		}
		var res rotationMsg
		if err := json.Unmarshal(data, &res); err != nil {
			return "", 0, fmt.Errorf("reading %s: %w", resPath, err)
		}
		os.Remove(resPath)
		if res.Error != "" {
			return res.To, 0, errors.New(res.Error)
		}
		return res.To, res.Generation, nil
	}
}
