package rootkey

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/atomicfile"
)

// The rotation protocol's files, in the keystore directory, and how often
// Watch looks for a request.
const (
	rotationRequest = "rotate.request"
	rotationResult  = "rotate.result"
	rotationPoll    = time.Second
)

// rotationMsg is rotate.request and rotate.result.
type rotationMsg struct {
	V          int    `json:"v"`
	To         string `json:"to"`
	Generation uint32 `json:"generation,omitempty"`
	Error      string `json:"error,omitempty"`
}

// Watch serves the rotation requests for the file keystore fs, whose
// directory is dir, until ctx ends. p is the provider fs was opened with
// (nil for the development root key). Watch owns p from then on: a
// rotation makes the new provider the store's and closes the one it
// replaces. Watch returns the provider in use when ctx ends, which the
// caller closes after the store. log receives the rotations' progress,
// never material; nil means no logging.
func Watch(ctx context.Context, fs *cryptosvc.FileStore, dir string, p cryptosvc.RootKeyProvider, log *zap.Logger) cryptosvc.RootKeyProvider {
	if log == nil {
		log = zap.NewNop()
	}
	t := time.NewTicker(rotationPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return p
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
			var next cryptosvc.RootKeyProvider
			next, res.To, res.Generation, err = rotate(ctx, fs, req.To, log)
			if err != nil {
				res.Error = err.Error()
			} else {
				Close(p)
				p = next
			}
		}
		b, _ := json.Marshal(&res)
		if err := atomicfile.Write(filepath.Join(dir, rotationResult), append(b, '\n'), ".tmp-"); err != nil {
			log.Error("root-key rotation: writing the result", zap.Error(err))
		}
		os.Remove(filepath.Join(dir, rotationRequest))
		atomicfile.SyncDir(dir)
	}
}

// rotate rotates fs to the provider uri names and returns that provider,
// open, on success.
func rotate(ctx context.Context, fs *cryptosvc.FileStore, uri string, log *zap.Logger) (cryptosvc.RootKeyProvider, string, uint32, error) {
	p, err := OpenURI(ctx, uri)
	if err != nil {
		log.Error("root-key rotation refused: the new root key does not open", zap.Error(err))
		return nil, "", 0, err
	}
	log.Info("root-key rotation started", zap.String("to", p.String()))
	start := time.Now()
	if err := fs.RotateRootKey(ctx, p); err != nil {
		Close(p)
		log.Error("root-key rotation failed; the store opens with either root key until it is finished", zap.String("to", p.String()), zap.Error(err))
		return nil, p.String(), 0, err
	}
	_, gen, _ := fs.RootKey()
	log.Warn("root key rotated: set root_key_uri to the new root key before the next start",
		zap.String("root_key", p.String()), zap.Uint32("storage_key_generation", gen), zap.Duration("took", time.Since(start)))
	return p, p.String(), gen, nil
}

// RequestRotation asks the process that holds the file keystore in dir
// (and runs Watch for it) to rotate it to the root key uri names, and
// waits up to timeout for its answer. It returns the new provider's name
// and the storage key's generation.
func RequestRotation(ctx context.Context, dir, uri string, timeout time.Duration) (string, uint32, error) {
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
