//go:build linux

package haproxy

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
)

// slowStream is a streaming encryption through HAProxy whose body trickles
// in, 1 KiB every 5 ms, so that it stays in flight on one replica until the
// test ends it. The replica that serves it shows in the response's AEAD
// header, the replicas being pinned to different AEADs.
type slowStream struct {
	aead, aad string
	pr        *io.PipeReader
	stop      chan struct{}
	wrote     chan struct{} // closed when the writer has returned
	resp      *http.Response

	mu   sync.Mutex
	sent []byte
}

// startSlowStream starts one and returns once its response has begun.
func startSlowStream(t *testing.T, c *cluster, hc *http.Client, n int) *slowStream {
	t.Helper()
	pr, pw := io.Pipe()
	s := &slowStream{aad: fmt.Sprintf("slow stream %d", n), pr: pr, stop: make(chan struct{}), wrote: make(chan struct{})}
	go func() {
		defer close(s.wrote)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				pw.Close()
				return
			case <-tick.C:
			}
			b := make([]byte, 1<<10)
			rand.Read(b)
			if _, err := pw.Write(b); err != nil {
				return // the transport closed the body: the request failed
			}
			s.mu.Lock()
			s.sent = append(s.sent, b...)
			s.mu.Unlock()
		}
	}()
	req, err := http.NewRequestWithContext(ctx(t), http.MethodPost, "http://"+c.lbAddr+"/v1/encrypt/"+testKey, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", api.ContentTypeStream)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set(api.HeaderContext, base64.StdEncoding.EncodeToString([]byte(s.aad)))
	s.resp, err = hc.Do(req)
	if err != nil {
		close(s.stop)
		t.Fatalf("slow stream: %v", err)
	}
	if s.resp.StatusCode != http.StatusOK {
		close(s.stop)
		t.Fatalf("slow stream: status %d", s.resp.StatusCode)
	}
	s.aead = s.resp.Header.Get(api.HeaderAEAD)
	return s
}

// finish ends the upload, reads the whole response and returns the
// ciphertext as acknowledged, or the error the client saw.
func (s *slowStream) finish() (ack, error) {
	close(s.stop)
	defer s.resp.Body.Close()
	ct, err := io.ReadAll(s.resp.Body) // a cut chunked response is an error
	s.pr.CloseWithError(errors.New("slow stream finished"))
	<-s.wrote
	if err != nil {
		return ack{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return ack{ct: ct, aad: []byte(s.aad), sum: sha256.Sum256(s.sent), stream: true}, nil
}
