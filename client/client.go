package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/cipherd/cipherd/api"
)

// Client talks to one cipherd service. It is safe for concurrent use.
type Client struct {
	base      *url.URL // scheme, host and optional path prefix (a mounted app)
	token     string
	tokenFile string // read for each request when set (WithTokenFile)
	hc        *http.Client
	tls       *tls.Config
	// mkCache keeps message keys of local opening (WithMessageKeyCache).
	mkCache *messageKeyCache
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends token as the bearer token on every request.
func WithToken(token string) Option { return func(c *Client) { c.token, c.tokenFile = token, "" } }

// WithTokenFile sends the content of the file name, without surrounding
// white space, as the bearer token, reading the file again for every
// request: a token that something else renews in place, such as a
// Kubernetes projected service-account token (a JWT the kubelet replaces
// before it expires), is sent as it is now. A request fails if the file
// cannot be read or is empty.
func WithTokenFile(name string) Option { return func(c *Client) { c.token, c.tokenFile = "", name } }

// maxTokenFile bounds the token file read: a JWT with many claims is a
// few KiB.
const maxTokenFile = 64 << 10

// WithHTTPClient uses hc for every request instead of a client of its own.
// Its timeout, if any, also bounds streams: prefer contexts. The client's
// own transport reads the service's answer to an upload it refused early
// (an unknown key, a bad token); through hc's transport such an answer may
// be lost and the upload fail with the connection's write error instead.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithTLSConfig uses cfg for HTTPS (a private CA, a client certificate for
// mTLS). It is ignored with WithHTTPClient.
func WithTLSConfig(cfg *tls.Config) Option { return func(c *Client) { c.tls = cfg } }

// New returns a client of the service at baseURL (http or https, with an
// optional path prefix where the service is mounted).
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("cipherd client: base URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("cipherd client: base URL %q: want http(s)://host[:port][/prefix]", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("cipherd client: base URL %q has a query or fragment", baseURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	c := &Client{base: u, mkCache: newMessageKeyCache(5*time.Minute, 1024)}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = &http.Client{Transport: newTransport(c)}
	}
	return c, nil
}

// url returns the URL of a route with its :key filled in.
func (c *Client) url(route, key string) string {
	p := strings.Replace(route, ":key", url.PathEscape(key), 1)
	return c.base.String() + p
}

// checkKey rejects names the service would refuse, before they can change
// the meaning of the path ("..", "a/b").
func checkKey(key string) error {
	ok := len(key) >= 1 && len(key) <= 128 && key[0] != '.' && key[0] != '-'
	for i := 0; ok && i < len(key); i++ {
		ch := key[i]
		ok = 'a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' || ch == '.' || ch == '_' || ch == '-'
	}
	if !ok {
		return &Error{API: api.Error{Code: api.CodeInvalidKeyName, Message: fmt.Sprintf("invalid key name %q: 1-128 characters of A-Z a-z 0-9 . _ - not starting with . or -", key)}}
	}
	return nil
}

// newRequest makes a request with the token.
func (c *Client) newRequest(ctx context.Context, method, u string, body io.Reader, contentType string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	tok := c.token
	if c.tokenFile != "" {
		if tok, err = readTokenFile(c.tokenFile); err != nil {
			return nil, err
		}
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return req, nil
}

// readTokenFile reads a bearer token from a file.
func readTokenFile(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", fmt.Errorf("cipherd client: token file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("cipherd client: token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case len(b) > maxTokenFile:
		return "", fmt.Errorf("cipherd client: token file %s: more than %d bytes", name, maxTokenFile)
	case tok == "":
		return "", fmt.Errorf("cipherd client: token file %s is empty", name)
	}
	return tok, nil
}

// do sends a JSON request (in may be nil) and decodes a 2xx response into out
// (may be nil). Any other status is returned as *Error.
func (c *Client) do(ctx context.Context, method, u string, in, out any) error {
	var body io.Reader
	ct := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("cipherd client: encoding the request: %w", err)
		}
		body, ct = bytes.NewReader(b), api.ContentTypeJSON
	}
	req, err := c.newRequest(ctx, method, u, body, ct)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return responseError(resp)
	}
	if out == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // keep the connection
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("cipherd client: decoding the %s response: %w", req.URL.Path, err)
	}
	return nil
}

// responseError reads an error response. A body that is not the service's
// error shape (a proxy's page) keeps only the status.
func responseError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &Error{Status: resp.StatusCode}
	if json.Unmarshal(b, &e.API) != nil || e.API.Code == "" {
		e.API = api.Error{Message: http.StatusText(resp.StatusCode) + " (not a cipherd error response)"}
	}
	if e.API.RequestID == "" {
		e.API.RequestID = resp.Header.Get(api.HeaderRequestID)
	}
	return e
}

// Encrypt seals plaintext under the latest version of key, bound to context
// (additional data, which decryption must present again; may be nil).
func (c *Client) Encrypt(ctx context.Context, key string, plaintext, context []byte) (*api.EncryptResult, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if plaintext == nil {
		plaintext = []byte{}
	}
	var res api.EncryptResult
	err := c.do(ctx, http.MethodPost, c.url(api.RouteEncrypt, key), &api.EncryptRequest{EncryptItem: api.EncryptItem{Plaintext: plaintext, Context: context}}, &res)
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// Decrypt opens a ciphertext of key with context.
func (c *Client) Decrypt(ctx context.Context, key string, ciphertext, context []byte) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	var res api.DecryptResult
	err := c.do(ctx, http.MethodPost, c.url(api.RouteDecrypt, key), &api.DecryptRequest{DecryptItem: api.DecryptItem{Ciphertext: nonNil(ciphertext), Context: context}}, &res)
	if err != nil {
		return nil, err
	}
	return nonNil(res.Plaintext), nil
}

// Rewrap moves a ciphertext (or a stream's header) to the latest version of
// key without revealing the plaintext to the caller.
func (c *Client) Rewrap(ctx context.Context, key string, ciphertext, context []byte) (*api.RewrapResult, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	var res api.RewrapResult
	err := c.do(ctx, http.MethodPost, c.url(api.RouteRewrap, key), &api.RewrapRequest{DecryptItem: api.DecryptItem{Ciphertext: nonNil(ciphertext), Context: context}}, &res)
	if err != nil {
		return nil, err
	}
	return &res, nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// EncryptBatch seals items in one request. The results are in item order,
// each with its own Error when it failed; err is set only when the request
// as a whole failed (authentication, a batch over the limit, …).
func (c *Client) EncryptBatch(ctx context.Context, key string, items []api.EncryptItem) ([]api.EncryptResult, error) {
	for i := range items {
		if items[i].Plaintext == nil {
			items[i].Plaintext = []byte{}
		}
	}
	return batch[api.EncryptResult](ctx, c, api.RouteEncrypt, key, &api.EncryptRequest{Items: items})
}

// DecryptBatch opens items in one request, like EncryptBatch.
func (c *Client) DecryptBatch(ctx context.Context, key string, items []api.DecryptItem) ([]api.DecryptResult, error) {
	return batch[api.DecryptResult](ctx, c, api.RouteDecrypt, key, &api.DecryptRequest{Items: items})
}

// RewrapBatch rewraps items in one request, like EncryptBatch.
func (c *Client) RewrapBatch(ctx context.Context, key string, items []api.DecryptItem) ([]api.RewrapResult, error) {
	return batch[api.RewrapResult](ctx, c, api.RouteRewrap, key, &api.RewrapRequest{Items: items})
}

// batch posts a batch. The service answers 200 when every item succeeded,
// 207 when some failed, and the first item's error status when all failed —
// with the items in every case; an error body means the request failed.
func batch[T any](ctx context.Context, c *Client, route, key string, in any) ([]T, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("cipherd client: encoding the request: %w", err)
	}
	req, err := c.newRequest(ctx, http.MethodPost, c.url(route, key), bytes.NewReader(b), api.ContentTypeJSON)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var out struct {
		Items *[]T `json:"items"`
		api.Error
	}
	if json.Unmarshal(body, &out) == nil && out.Items != nil && (resp.StatusCode/100 == 2 || out.Code == "") {
		return *out.Items, nil
	}
	if resp.StatusCode/100 == 2 {
		return nil, fmt.Errorf("cipherd client: a %d batch response without items", resp.StatusCode)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return nil, responseError(resp)
}

// DataKey returns a fresh data key: its plaintext (unless req.WrappedOnly)
// and its copy wrapped under key, to store next to the data it encrypts.
func (c *Client) DataKey(ctx context.Context, key string, req api.DataKeyRequest) (*api.DataKeyResponse, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	var res api.DataKeyResponse
	if err := c.do(ctx, http.MethodPost, c.url(api.RouteDataKey, key), &req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// CreateKey creates a key (with a random secret, or req.Import).
func (c *Client) CreateKey(ctx context.Context, name string, req api.CreateKeyRequest) (*api.Key, error) {
	return c.keyCall(ctx, http.MethodPost, api.RouteKey, name, &req)
}

// DescribeKey returns a key's metadata (never its material).
func (c *Client) DescribeKey(ctx context.Context, name string) (*api.Key, error) {
	return c.keyCall(ctx, http.MethodGet, api.RouteKey, name, nil)
}

// RotateKey adds a version to a key; new data uses it from then on.
func (c *Client) RotateKey(ctx context.Context, name string) (*api.Key, error) {
	return c.keyCall(ctx, http.MethodPost, api.RouteKeyRotate, name, nil)
}

// RotateKeyImport adds a version made of existing material (32 bytes) to a
// key; new data uses it from then on.
func (c *Client) RotateKeyImport(ctx context.Context, name string, material []byte) (*api.Key, error) {
	return c.keyCall(ctx, http.MethodPost, api.RouteKeyRotate, name, &api.RotateKeyRequest{Import: material})
}

// ConfigureKey replaces a key's configuration with cfg: every field, the
// zero ones included, so that the key ends with exactly cfg.
func (c *Client) ConfigureKey(ctx context.Context, name string, cfg api.KeyConfig) (*api.Key, error) {
	p := api.ReplaceKeyConfig(cfg)
	return c.keyCall(ctx, http.MethodPut, api.RouteKeyConfig, name, &p)
}

// UpdateKeyConfig changes the fields of a key's configuration that patch
// sets (api.Some, or api.Null for the default) and keeps the others.
func (c *Client) UpdateKeyConfig(ctx context.Context, name string, patch api.KeyConfigPatch) (*api.Key, error) {
	return c.keyCall(ctx, http.MethodPut, api.RouteKeyConfig, name, &patch)
}

// DeleteKey schedules the deletion of a key whose configuration allows it,
// after the service's default wait (key_deletion_default_wait): until then
// the key is refused to every operation, and CancelKeyDeletion restores
// it. ScheduleKeyDeletion chooses the wait.
func (c *Client) DeleteKey(ctx context.Context, name string) error {
	_, err := c.ScheduleKeyDeletion(ctx, name, -1)
	return err
}

// ListKeys returns the keys the caller may read.
func (c *Client) ListKeys(ctx context.Context) ([]api.Key, error) {
	var out api.KeyList
	if err := c.do(ctx, http.MethodGet, c.url(api.RouteKeys, ""), nil, &out); err != nil {
		return nil, err
	}
	return out.Keys, nil
}

func (c *Client) keyCall(ctx context.Context, method, route, name string, in any) (*api.Key, error) {
	if err := checkKey(name); err != nil {
		return nil, err
	}
	var k api.Key
	if err := c.do(ctx, method, c.url(route, name), in, &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// Ready returns nil when the service answers /readyz with 200: self-tests
// passed, keys loaded, not draining. Otherwise an *Error (503 not_ready) or
// the transport's error.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, c.url(api.RouteReadyz, ""), nil, nil)
}

// Version returns the service's build information.
func (c *Client) Version(ctx context.Context) (*api.Version, error) {
	var v api.Version
	if err := c.do(ctx, http.MethodGet, c.url(api.RouteVersion, ""), nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
