package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
)

// The OpenAPI document (openapi.json, served at /v1/openapi.json) and
// docs/API.md are checked against the code: every route of the route table
// with its limits, every error code with its status, and every wire type's
// fields.

// apiCodes returns every api.Code constant, read from the source of package
// api so that a new code cannot be forgotten here.
func apiCodes(t *testing.T) []api.Code {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../api/errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []api.Code
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
				continue
			}
			for _, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok {
					t.Fatalf("api/errors.go: a Code constant that is not a string literal")
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				codes = append(codes, api.Code(s))
			}
		}
	}
	if len(codes) < 20 {
		t.Fatalf("found only %d codes in api/errors.go", len(codes))
	}
	return codes
}

// defaultServer is a server with the default configuration and its route
// table, enough to describe the API.
func defaultServer() *Server {
	s := &Server{cfg: Config{}.Defaults()}
	s.authp.Store(&authState{})
	s.tab = compileTable(s.routes())
	return s
}

// defaultRoutes is the route table under the default configuration.
func defaultRoutes() []route { return defaultServer().tab.rows }

type jsonObj = map[string]any

func loadOpenAPI(t *testing.T, b []byte) jsonObj {
	t.Helper()
	var doc jsonObj
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return doc
}

func obj(t *testing.T, v any, where string) jsonObj {
	t.Helper()
	o, ok := v.(jsonObj)
	if !ok {
		t.Fatalf("%s: not an object", where)
	}
	return o
}

// TestOpenAPIBase: what the route table says is in the hand-written part of
// the document nowhere, so that it has one source.
func TestOpenAPIBase(t *testing.T) {
	doc := loadOpenAPI(t, openAPIBase)
	if doc["x-cipherd-limits"] != nil || bytes.Contains(openAPIBase, []byte(`"maxItems"`)) {
		t.Error("openapi.json states limits; they come from the configuration")
	}
	if params := obj(t, obj(t, doc["components"], "components")["parameters"], "parameters"); len(params) > 0 {
		for name, p := range params {
			if obj(t, p, name)["in"] == "query" {
				t.Errorf("openapi.json defines query parameter %s; they come from the route table", name)
			}
		}
	}
	for p, item := range obj(t, doc["paths"], "paths") {
		for m, op := range obj(t, item, p) {
			for k, v := range obj(t, op, m+" "+p) {
				if strings.HasPrefix(k, "x-cipherd-") || k == "security" {
					t.Errorf("%s %s: openapi.json sets %s; it comes from the route table", m, p, k)
				}
				if k == "parameters" {
					for _, x := range v.([]any) {
						if obj(t, x, k)["in"] == "query" {
							t.Errorf("%s %s: openapi.json has a query parameter; they come from the route table", m, p)
						}
					}
				}
			}
		}
	}
}

func TestOpenAPIDocument(t *testing.T) {
	s := defaultServer()
	b, err := s.openAPI()
	if err != nil {
		t.Fatal(err)
	}
	doc := loadOpenAPI(t, b)
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Errorf("openapi %q, want 3.1.x", v)
	}
	info := obj(t, doc["info"], "info")
	if info["title"] != "cipherd" || info["version"] == nil {
		t.Errorf("info: %v", info)
	}

	// Every $ref resolves.
	var walk func(v any, where string)
	walk = func(v any, where string) {
		switch v := v.(type) {
		case jsonObj:
			if r, ok := v["$ref"].(string); ok {
				var cur any = doc
				for _, part := range strings.Split(strings.TrimPrefix(r, "#/"), "/") {
					o, _ := cur.(jsonObj)
					cur = o[part]
				}
				if !strings.HasPrefix(r, "#/") || cur == nil {
					t.Errorf("%s: $ref %s does not resolve", where, r)
				}
			}
			for k, x := range v {
				walk(x, where+"/"+k)
			}
		case []any:
			for i, x := range v {
				walk(x, fmt.Sprintf("%s/%d", where, i))
			}
		}
	}
	walk(doc, "#")

	// Every route with its method and limits, and nothing else.
	paths := obj(t, doc["paths"], "paths")
	seen := map[string]bool{}
	for _, r := range defaultRoutes() {
		p, m := openAPIPath(r.path), strings.ToLower(r.method)
		where := r.method + " " + p
		item, ok := paths[p].(jsonObj)
		if !ok {
			t.Errorf("%s: path missing", where)
			continue
		}
		op, ok := item[m].(jsonObj)
		if !ok {
			t.Errorf("%s: method missing", where)
			continue
		}
		seen[m+" "+p] = true
		wantAuth := string(r.op)
		if wantAuth == "" {
			wantAuth = "none"
		}
		if op["x-cipherd-auth"] != wantAuth {
			t.Errorf("%s: x-cipherd-auth %v, want %s", where, op["x-cipherd-auth"], wantAuth)
		}
		if sec, ok := op["security"].([]any); (r.op == "") != (ok && len(sec) == 0) {
			t.Errorf("%s: security %v for auth %q", where, op["security"], r.op)
		}
		if n, _ := op["x-cipherd-max-body"].(json.Number); n.String() != strconv.FormatInt(r.maxBody, 10) {
			t.Errorf("%s: x-cipherd-max-body %v, want %d", where, op["x-cipherd-max-body"], r.maxBody)
		}
		if op["x-cipherd-timeout"] != r.timeout.String() {
			t.Errorf("%s: x-cipherd-timeout %v, want %s", where, op["x-cipherd-timeout"], r.timeout)
		}
		if n, _ := op["x-cipherd-rate-cost"].(json.Number); r.op != "" && n.String() != strconv.Itoa(max(r.cost, 1)) || r.op == "" && op["x-cipherd-rate-cost"] != nil {
			t.Errorf("%s: x-cipherd-rate-cost %v, want %d", where, op["x-cipherd-rate-cost"], r.cost)
		}
		if n, _ := op["x-cipherd-max-items"].(json.Number); r.items != 0 && n.String() != strconv.Itoa(r.items) || r.items == 0 && op["x-cipherd-max-items"] != nil {
			t.Errorf("%s: x-cipherd-max-items %v, want %d", where, op["x-cipherd-max-items"], r.items)
		}
		if got := op["x-cipherd-max-verify-full"]; r.verifyFull != 0 && fmt.Sprint(got) != strconv.FormatInt(r.verifyFull, 10) || r.verifyFull == 0 && got != nil {
			t.Errorf("%s: x-cipherd-max-verify-full %v, want %d", where, op["x-cipherd-max-verify-full"], r.verifyFull)
		}
		if got := op["x-cipherd-verify-full-budget"]; r.verifyFull != 0 && fmt.Sprint(got) != strconv.FormatInt(s.cfg.VerifyFullBudget, 10) || r.verifyFull == 0 && got != nil {
			t.Errorf("%s: x-cipherd-verify-full-budget %v, want %d", where, got, s.cfg.VerifyFullBudget)
		}
		if got := op["x-cipherd-max-streams-per-identity"]; r.stream && fmt.Sprint(got) != strconv.Itoa(s.cfg.MaxStreamsPerIdentity) || !r.stream && got != nil {
			t.Errorf("%s: x-cipherd-max-streams-per-identity %v, want %d", where, got, s.cfg.MaxStreamsPerIdentity)
		}
		if st, _ := op["x-cipherd-streaming"].(bool); st != r.stream {
			t.Errorf("%s: x-cipherd-streaming %v, want %v", where, st, r.stream)
		}
		if idle, _ := op["x-cipherd-stream-idle-timeout"].(string); r.stream && idle != s.cfg.StreamIdleTimeout.String() || !r.stream && idle != "" {
			t.Errorf("%s: x-cipherd-stream-idle-timeout %q", where, idle)
		}
		var query []string
		params, _ := op["parameters"].([]any)
		for _, x := range params {
			if p := obj(t, x, where); p["in"] == "query" {
				enum, _ := json.Marshal(obj(t, p["schema"], where)["enum"])
				query = append(query, fmt.Sprintf("%s=%s", p["name"], enum))
			}
		}
		var wantQuery []string
		for _, q := range r.query {
			enum, _ := json.Marshal(q.values)
			wantQuery = append(wantQuery, fmt.Sprintf("%s=%s", q.name, enum))
		}
		if !slices.Equal(query, wantQuery) {
			t.Errorf("%s: query parameters %v, the row takes %v", where, query, wantQuery)
		}
		if r.stream {
			body := obj(t, obj(t, op["requestBody"], where+" requestBody")["content"], where+" content")
			if body[api.ContentTypeJSON] == nil || body[api.ContentTypeStream] == nil {
				t.Errorf("%s: a streaming route must take JSON and octet-stream", where)
			}
		}
		if strings.Contains(p, "{key}") {
			params, _ := json.Marshal(op["parameters"])
			if !bytes.Contains(params, []byte(`"#/components/parameters/key"`)) {
				t.Errorf("%s: no key parameter", where)
			}
		}
		responses := obj(t, op["responses"], where+" responses")
		ok2xx := false
		for status, resp := range responses {
			if strings.HasPrefix(status, "2") {
				ok2xx = true
				continue
			}
			ref, _ := obj(t, resp, where+" "+status)["$ref"].(string)
			if !strings.HasPrefix(ref, "#/components/responses/") {
				t.Errorf("%s %s: an error response must be a shared error response", where, status)
			}
		}
		if !ok2xx {
			t.Errorf("%s: no success response", where)
		}
	}
	for p, item := range paths {
		for m := range obj(t, item, p) {
			if !seen[m+" "+p] {
				t.Errorf("%s %s is documented but not routed", strings.ToUpper(m), p)
			}
		}
	}

	// Every code, in the Error schema and with its status.
	schemas := obj(t, obj(t, doc["components"], "components")["schemas"], "schemas")
	errProps := obj(t, obj(t, schemas["Error"], "Error")["properties"], "Error.properties")
	enum, _ := obj(t, errProps["code"], "Error.code")["enum"].([]any)
	statuses := obj(t, doc["x-cipherd-error-codes"], "x-cipherd-error-codes")
	codes := apiCodes(t)
	for _, c := range codes {
		if !slices.Contains(enum, any(string(c))) {
			t.Errorf("code %s is not in the Error schema's enum", c)
		}
		st, ok := statuses[string(c)].(jsonObj)
		if !ok {
			t.Errorf("code %s is not in x-cipherd-error-codes", c)
			continue
		}
		if n, _ := st["status"].(json.Number); n.String() != strconv.Itoa(c.Status()) {
			t.Errorf("code %s: documented status %v, sent with %d", c, st["status"], c.Status())
		}
	}
	if len(enum) != len(codes) || len(statuses) != len(codes) {
		t.Errorf("%d codes in the enum and %d in x-cipherd-error-codes; api has %d", len(enum), len(statuses), len(codes))
	}

	// Every wire type's JSON fields are its schema's properties.
	types := map[string]reflect.Type{
		"EncryptItem":          reflect.TypeFor[api.EncryptItem](),
		"EncryptRequest":       reflect.TypeFor[api.EncryptRequest](),
		"EncryptResult":        reflect.TypeFor[api.EncryptResult](),
		"EncryptBatchResponse": reflect.TypeFor[api.BatchResponse[api.EncryptResult]](),
		"DecryptItem":          reflect.TypeFor[api.DecryptItem](),
		"DecryptRequest":       reflect.TypeFor[api.DecryptRequest](),
		"DecryptResult":        reflect.TypeFor[api.DecryptResult](),
		"DecryptBatchResponse": reflect.TypeFor[api.BatchResponse[api.DecryptResult]](),
		"RewrapBatchResponse":  reflect.TypeFor[api.BatchResponse[api.RewrapResult]](),
		"DataKeyRequest":       reflect.TypeFor[api.DataKeyRequest](),
		"DataKeyResponse":      reflect.TypeFor[api.DataKeyResponse](),
		"KeyConfig":            reflect.TypeFor[api.KeyConfig](),
		"KeyConfigPatch":       reflect.TypeFor[api.KeyConfigPatch](),
		"CreateKeyRequest":     reflect.TypeFor[api.CreateKeyRequest](),
		"KeyVersion":           reflect.TypeFor[api.KeyVersion](),
		"Key":                  reflect.TypeFor[api.Key](),
		"KeyVersionUsage":      reflect.TypeFor[api.KeyVersionUsage](),
		"KeyList":              reflect.TypeFor[api.KeyList](),
		"KeyDeletion":          reflect.TypeFor[api.KeyDeletion](),
		"TrimKeyRequest":       reflect.TypeFor[api.TrimKeyRequest](),
		"CreateTokenRequest":   reflect.TypeFor[api.CreateTokenRequest](),
		"Token":                reflect.TypeFor[api.Token](),
		"CreatedToken":         reflect.TypeFor[api.CreatedToken](),
		"TokenList":            reflect.TypeFor[api.TokenList](),
		"Version":              reflect.TypeFor[api.Version](),
		"Route":                reflect.TypeFor[api.Route](),
		"APIDescription":       reflect.TypeFor[api.APIDescription](),
		"Error":                reflect.TypeFor[api.Error](),
	}
	for name, typ := range types {
		s, ok := schemas[name].(jsonObj)
		if !ok {
			t.Errorf("schema %s missing", name)
			continue
		}
		var props []string
		for p := range obj(t, s["properties"], name+".properties") {
			props = append(props, p)
		}
		slices.Sort(props)
		want := jsonFields(typ)
		slices.Sort(want)
		if !slices.Equal(props, want) {
			t.Errorf("schema %s has properties %v; %s has JSON fields %v", name, props, typ, want)
		}
	}
}

// jsonFields returns the JSON names of a struct's fields, embedded structs
// flattened as encoding/json does.
func jsonFields(typ reflect.Type) []string {
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			out = append(out, jsonFields(f.Type)...)
		case !f.IsExported():
		case name == "":
			out = append(out, f.Name)
		default:
			out = append(out, name)
		}
	}
	return out
}

// TestOpenAPIServed: the served document and GET /v1/api state the limits
// of the running configuration, not the defaults.
func TestOpenAPIServed(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true, MaxJSONBody: 1 << 20, MaxBatchItems: 7, MaxVerifyFull: 3 << 20,
		RequestTimeout: 9 * time.Second, StreamIdleTimeout: 11 * time.Second, RateLimit: 5, RateBurst: 13,
		VerifyFullBudget: 5 << 20, MaxStreamsPerIdentity: 3, MaxConnections: 17})
	code, body, hdr := ts.do(t, "GET", api.RouteOpenAPI, "", nil, "-")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), api.ContentTypeJSON) {
		t.Fatalf("GET %s: %d, %s, %d bytes", api.RouteOpenAPI, code, hdr.Get("Content-Type"), len(body))
	}
	doc := loadOpenAPI(t, body)
	limits := obj(t, doc["x-cipherd-limits"], "x-cipherd-limits")
	for name, want := range map[string]string{
		"max_json_body": "1048576", "max_batch_items": "7", "max_verify_full": "3145728",
		"request_timeout": "9s", "stream_idle_timeout": "11s", "rate_limit": "5", "rate_burst": "13",
		"max_connections": "17",
	} {
		if got := fmt.Sprint(obj(t, limits[name], name)["value"]); got != want {
			t.Errorf("x-cipherd-limits %s: %s, want %s", name, got, want)
		}
	}
	schemas := obj(t, obj(t, doc["components"], "components")["schemas"], "schemas")
	for _, name := range []string{"EncryptRequest", "DecryptRequest"} {
		items := obj(t, obj(t, obj(t, schemas[name], name)["properties"], name)["items"], name)
		if got := fmt.Sprint(items["maxItems"]); got != "7" {
			t.Errorf("%s.items.maxItems %s, want 7", name, got)
		}
	}
	dec := obj(t, obj(t, obj(t, doc["paths"], "paths")["/v1/decrypt/{key}"], "decrypt")["post"], "decrypt")
	for k, want := range map[string]string{
		"x-cipherd-max-body": "1048576", "x-cipherd-timeout": "9s", "x-cipherd-max-items": "7",
		"x-cipherd-max-verify-full": "3145728", "x-cipherd-stream-idle-timeout": "11s", "x-cipherd-rate-cost": "1",
		"x-cipherd-verify-full-budget": "5242880", "x-cipherd-max-streams-per-identity": "3",
	} {
		if got := fmt.Sprint(dec[k]); got != want {
			t.Errorf("decrypt %s: %s, want %s", k, got, want)
		}
	}

	var desc api.APIDescription
	code, body, _ = ts.do(t, "GET", api.RouteAPI, "", nil, "-")
	if code != 200 || json.Unmarshal(body, &desc) != nil {
		t.Fatalf("GET /v1/api: %d %s", code, body)
	}
	if desc.RateLimit == nil || *desc.RateLimit != (api.RateLimit{PerSecond: 5, Burst: 13}) {
		t.Errorf("/v1/api rate_limit %+v", desc.RateLimit)
	}
	for _, r := range desc.Routes {
		if r.Method == "POST" && r.Path == api.RouteDecrypt {
			if r.MaxBody != 1<<20 || r.Timeout != "9s" || r.MaxItems != 7 || r.MaxVerifyFull != 3<<20 || r.StreamIdleTimeout != "11s" ||
				r.VerifyFullBudget != 5<<20 || r.MaxStreamsPerIdentity != 3 ||
				len(r.Query) != 2 || r.Query[0].Name != "verify" || !slices.Equal(r.Query[0].Values, []string{"full"}) ||
				r.Query[1].Name != "range" || r.Query[1].Pattern != "A-B|A-" || r.Query[1].Values != nil {
				t.Errorf("/v1/api decrypt: %+v", r)
			}
		}
	}
}

// TestOpenAPIDocsAPI: docs/API.md names every route and has every code in its
// table with the status it is sent with.
func TestOpenAPIDocsAPI(t *testing.T) {
	b, err := os.ReadFile("../docs/API.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	// The routes table has a row per route with its row's auth, query,
	// timeout and cost.
	for _, r := range defaultRoutes() {
		p := openAPIPath(r.path)
		line := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(r.method+" "+p) + "` \\|.*$").FindString(doc)
		cells := strings.Split(line, " | ")
		if len(cells) != 7 {
			t.Errorf("docs/API.md has no routes table row for %s %s", r.method, p)
			continue
		}
		where := "docs/API.md " + r.method + " " + p
		if auth := "`" + string(r.op) + "`"; r.op != "" && !strings.Contains(cells[1], auth) || r.op == "" && cells[1] != "none" {
			t.Errorf("%s: auth %q, the row checks %q", where, cells[1], r.op)
		}
		var query []string
		for _, q := range r.query {
			for _, v := range q.values {
				query = append(query, "`?"+q.name+"="+v+"`")
			}
			if q.pattern != "" {
				query = append(query, "`?"+q.name+"="+strings.Split(q.pattern, "|")[0]+"`")
			}
		}
		if want := strings.Join(query, ", "); want == "" && cells[3] != "—" || want != "" && cells[3] != want {
			t.Errorf("%s: query %q, the row takes %q", where, cells[3], want)
		}
		if !strings.HasPrefix(cells[4], r.timeout.String()) {
			t.Errorf("%s: timeout %q, the row has %s", where, cells[4], r.timeout)
		}
		if want := strconv.Itoa(max(r.cost, 1)); r.op != "" && cells[5] != want || r.op == "" && cells[5] != "—" {
			t.Errorf("%s: cost %q, the row has %d", where, cells[5], r.cost)
		}
	}
	for _, c := range apiCodes(t) {
		row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(string(c)) + "` \\| " + strconv.Itoa(c.Status()) + " \\|")
		if !row.MatchString(doc) {
			t.Errorf("docs/API.md has no error table row for `%s` with status %d", c, c.Status())
		}
	}
	// The documented defaults are the defaults.
	def := Config{}.Defaults()
	for _, want := range []string{
		fmt.Sprintf("%d MiB", def.MaxJSONBody>>20),
		fmt.Sprintf("%d items", def.MaxBatchItems),
		fmt.Sprintf("%d MiB", def.MaxVerifyFull>>20),
		def.RequestTimeout.String(),
		def.StreamIdleTimeout.String(),
		(5 * time.Minute).String(),
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/API.md does not state the default %q", want)
		}
	}
}
