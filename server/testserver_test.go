package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cipherd/cipherd/cryptosvc"
)

// testServer is a real cipherd listening on a loopback port.
type testServer struct {
	*Server
	URL   string // http://127.0.0.1:port
	Token string // the admin token
	Logs  *observer.ObservedLogs
	ln    net.Listener
}

// startTestServer starts a server with cfg (DataDir, Addr, AdminToken, the
// logger and the keystore are filled in when empty), waits until it answers,
// and stops it when the test ends. The keystore it fills in is the file
// keystore in DataDir/keys with the development root key, as cipherd serve
// opens it without a root key; it closes after the server's Shutdown.
func startTestServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.AdminToken == "" {
		cfg.AdminToken = "test-admin-token"
	}
	core, logs := observer.New(zap.DebugLevel)
	if cfg.Logger == nil {
		cfg.Logger = zap.New(core)
	}
	var store *cryptosvc.FileStore
	if cfg.Keystore == nil {
		store = openTestStore(t, cfg.DataDir, cfg.Logger)
		cfg.Keystore = store
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		store.Close()
		t.Fatal(err)
	}
	cfg.Addr = ln.Addr().String()
	srv, err := New(context.Background(), cfg)
	if err != nil {
		ln.Close()
		store.Close()
		t.Fatal(err)
	}
	ts := &testServer{Server: srv, URL: "http://" + ln.Addr().String(), Token: cfg.AdminToken, Logs: logs, ln: ln}
	if srv.tls != nil {
		ts.URL = "https://" + ln.Addr().String()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	// Serve attaches its listener asynchronously; a Shutdown before that
	// would return at once and leave Serve running.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: time.Second}
	for i := 0; ; i++ {
		if r, err := client.Get(ts.URL + "/healthz"); err == nil {
			r.Body.Close()
			break
		}
		if i > 400 {
			t.Fatal("server did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Its connection would hold a place of max_connections.
	client.CloseIdleConnections()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
		if store != nil {
			store.Close()
		}
	})
	return ts
}

// openTestStore opens the file keystore in dataDir/keys with the
// development root key. The caller closes it.
func openTestStore(t testing.TB, dataDir string, log *zap.Logger) *cryptosvc.FileStore {
	t.Helper()
	fs, err := cryptosvc.OpenFileStore(filepath.Join(dataDir, "keys"), cryptosvc.FileStoreConfig{DevRootKey: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// do sends a request with the admin token (unless token is "-") and returns
// the status and body.
func (ts *testServer) do(t testing.TB, method, path, contentType string, body io.Reader, token string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	switch token {
	case "":
		req.Header.Set("Authorization", "Bearer "+ts.Token)
	case "-":
	default:
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return resp.StatusCode, b, resp.Header
}

// postJSON posts v as JSON with the admin token and decodes the response into out.
func (ts *testServer) postJSON(t testing.TB, path string, v, out any) int {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	code, body, _ := ts.do(t, "POST", path, "application/json", bytes.NewReader(b), "")
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("POST %s: %d %s: %v", path, code, body, err)
		}
	}
	return code
}
