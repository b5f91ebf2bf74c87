package server

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cipherd/cipherd/api"
)

// GET /v1/api and GET /v1/openapi.json are made from the route table the
// app serves (s.tab) and the configuration in force, so that every limit
// they state is the one applied.

// openAPIBase is the hand-written part of the OpenAPI 3.1 document: the
// prose, the schemas, the responses of every operation. What the route table
// says (auth, limits, timeouts, rate cost, query parameters) is added to it
// by openAPI.
//
//go:embed openapi.json
var openAPIBase []byte

// apiRoute describes a row as GET /v1/api shows it.
func (s *Server) apiRoute(r *route) api.Route {
	ar := api.Route{Method: r.method, Path: r.path, Auth: string(r.op), AuthOr: string(r.orOp), MaxBody: r.maxBody, Timeout: r.timeout.String(), MaxItems: r.items, Streaming: r.stream, MaxVerifyFull: r.verifyFull}
	if r.op == "" {
		ar.Auth = "none"
	} else {
		ar.RateCost = max(r.cost, 1)
	}
	if r.stream {
		ar.StreamIdleTimeout = s.cfg.StreamIdleTimeout.String()
		ar.MaxStreamsPerIdentity = max(s.cfg.MaxStreamsPerIdentity, 0)
	}
	if r.verifyFull > 0 {
		ar.VerifyFullBudget = s.cfg.VerifyFullBudget
	}
	for _, q := range r.query {
		ar.Query = append(ar.Query, api.QueryParam{Name: q.name, Values: q.values, Pattern: q.pattern, Description: q.doc})
	}
	return ar
}

// apiDescription is the body of GET /v1/api.
func (s *Server) apiDescription() *api.APIDescription {
	out := &api.APIDescription{Routes: make([]api.Route, 0, len(s.tab.rows))}
	for i := range s.tab.rows {
		out.Routes = append(out.Routes, s.apiRoute(&s.tab.rows[i]))
	}
	if l := s.auth().limits; l != nil {
		out.RateLimit = &api.RateLimit{PerSecond: l.rate, Burst: l.burst}
	}
	return out
}

// openAPIPath turns a fiber route (/v1/keys/:key) into an OpenAPI path
// (/v1/keys/{key}).
func openAPIPath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if name, ok := strings.CutPrefix(s, ":"); ok {
			parts[i] = "{" + name + "}"
		}
	}
	return strings.Join(parts, "/")
}

// openAPI returns the OpenAPI document: openAPIBase with, on every
// operation, what its row says, and the server-wide limits in
// x-cipherd-limits. Every row must have its operation in the base document
// and every operation there a row (TestOpenAPIDocument).
func (s *Server) openAPI() ([]byte, error) {
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(openAPIBase))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("server: openapi.json: %w", err)
	}
	paths, _ := doc["paths"].(map[string]any)
	for i := range s.tab.rows {
		r := &s.tab.rows[i]
		item, _ := paths[openAPIPath(r.path)].(map[string]any)
		op, _ := item[strings.ToLower(r.method)].(map[string]any)
		if op == nil {
			return nil, fmt.Errorf("server: openapi.json has no %s %s", r.method, openAPIPath(r.path))
		}
		ar := s.apiRoute(r)
		op["x-cipherd-auth"] = ar.Auth
		if ar.AuthOr != "" {
			op["x-cipherd-auth-or"] = ar.AuthOr
		}
		if r.op == "" {
			op["security"] = []any{}
		} else {
			op["x-cipherd-rate-cost"] = ar.RateCost
		}
		op["x-cipherd-max-body"] = ar.MaxBody
		op["x-cipherd-timeout"] = ar.Timeout
		if ar.MaxItems > 0 {
			op["x-cipherd-max-items"] = ar.MaxItems
		}
		if ar.Streaming {
			op["x-cipherd-streaming"] = true
			op["x-cipherd-stream-idle-timeout"] = ar.StreamIdleTimeout
		}
		if ar.MaxStreamsPerIdentity > 0 {
			op["x-cipherd-max-streams-per-identity"] = ar.MaxStreamsPerIdentity
		}
		if ar.MaxVerifyFull > 0 {
			op["x-cipherd-max-verify-full"] = ar.MaxVerifyFull
			op["x-cipherd-verify-full-budget"] = ar.VerifyFullBudget
		}
		params, _ := op["parameters"].([]any)
		for _, q := range r.query {
			schema := map[string]any{"type": "string", "enum": q.values}
			if q.pattern != "" {
				schema = map[string]any{"type": "string", "pattern": q.regex, "examples": []string{q.example}}
			}
			params = append(params, map[string]any{
				"name":        q.name,
				"in":          "query",
				"required":    false,
				"description": q.doc,
				"schema":      schema,
			})
		}
		if params != nil {
			op["parameters"] = params
		}
	}
	schemas, _ := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for _, name := range []string{"EncryptRequest", "DecryptRequest", "MessageKeyRequest"} {
		props, _ := schemas[name].(map[string]any)["properties"].(map[string]any)
		items, _ := props["items"].(map[string]any)
		if items == nil {
			return nil, fmt.Errorf("server: openapi.json: %s has no items", name)
		}
		items["maxItems"] = s.cfg.MaxBatchItems
	}
	limit := func(v any, setting, desc string) map[string]any {
		return map[string]any{"value": v, "setting": setting, "description": desc}
	}
	var rate float64
	var burst int
	if l := s.auth().limits; l != nil {
		rate, burst = l.rate, l.burst
	}
	doc["x-cipherd-limits"] = map[string]any{
		"max_json_body":            limit(s.cfg.MaxJSONBody, "max_json_body", "Largest JSON body on the data routes (encrypt, decrypt, rewrap); each operation's x-cipherd-max-body is its own."),
		"max_batch_items":          limit(s.cfg.MaxBatchItems, "max_batch_items", "Most items in one batch."),
		"max_verify_full":          limit(s.cfg.MaxVerifyFull, "max_verify_full", "Largest plaintext ?verify=full buffers; a Content-Length no such plaintext could have is refused 413 unread."),
		"verify_full_budget":       limit(s.cfg.VerifyFullBudget, "verify_full_budget", "Bytes all ?verify=full requests together may buffer; each reserves its Content-Length (at most max_verify_full), or max_verify_full when chunked, and is refused 503 verify_full_busy when the budget cannot cover it."),
		"max_streams_per_identity": limit(s.cfg.MaxStreamsPerIdentity, "max_streams_per_identity", "Streaming requests one identity may have in flight; more are refused 429 too_many_streams; -1: no limit."),
		"io_buffer_size":           limit(s.readBufferSize(), "io_buffer_size", "Bytes of each connection's read buffer, and so the largest request line and headers; larger ones are refused 431 headers_too_large."),
		"max_connections":          limit(s.cfg.MaxConnections, "max_connections", "Connections the server holds open at once; at the limit it accepts no more until one closes; -1: no limit."),
		"request_timeout":          limit(s.cfg.RequestTimeout.String(), "request_timeout", "Time to receive a request's headers and JSON body, and the deadline of most operations (x-cipherd-timeout)."),
		"stream_idle_timeout":      limit(s.cfg.StreamIdleTimeout.String(), "stream_idle_timeout", "A stream that sends or accepts nothing for this long is cut."),
		"rate_limit":               limit(rate, "rate_limit", "Requests per second each identity may make, in tokens (x-cipherd-rate-cost); 0: no limit."),
		"rate_burst":               limit(burst, "rate_burst", "Tokens an identity may spend at once above rate_limit; 0 when there is no limit."),
		"auth_failure_rate":        limit(s.cfg.AuthFailureRate, "auth_failure_rate", "Failed authentications per second allowed per client address (IPv4, or IPv6 /64); over it every request from the address is refused 429 auth_rate_limited before its credential is looked at; -1: no limit."),
		"auth_failure_burst":       limit(s.cfg.AuthFailureBurst, "auth_failure_burst", "Failed authentications an address may make at once above auth_failure_rate."),
	}
	return json.Marshal(doc)
}

// servedOpenAPI returns the document of GET /v1/openapi.json, made once for
// the rate limits in force (the rest of what it states is fixed at start).
func (s *Server) servedOpenAPI() ([]byte, error) {
	s.openAPIMu.Lock()
	defer s.openAPIMu.Unlock()
	if s.openAPIDoc == nil || s.openAPIFor != s.auth().limits {
		doc, err := s.openAPI()
		if err != nil {
			return nil, err
		}
		s.openAPIDoc, s.openAPIFor = doc, s.auth().limits
	}
	return s.openAPIDoc, nil
}
