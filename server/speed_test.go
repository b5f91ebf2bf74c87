package server

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/kernels"
	"github.com/cipherd/cipherd/selftest"
	"github.com/cipherd/cipherd/server/speedview"
)

// speedJSON is GET /speed's JSON, decoded as a client would.
type speedJSON struct {
	Summary *struct {
		AEAD   string `json:"aead"`
		Impl   string `json:"impl"`
		Source string `json:"source"`
		Cells  []struct {
			Size int     `json:"size"`
			Rate float64 `json:"bytes_per_second"`
			Min  float64 `json:"min_bytes_per_second"`
			Max  float64 `json:"max_bytes_per_second"`
		} `json:"cells"`
		GoImpl string  `json:"go_impl"`
		VsGo   float64 `json:"vs_go"`
		Reason string  `json:"reason"`
	} `json:"summary"`
	Host struct {
		Brand      string   `json:"brand"`
		Features   []string `json:"features"`
		GOMAXPROCS int      `json:"gomaxprocs"`
	} `json:"host"`
	Build struct {
		Version   string `json:"version"`
		GoVersion string `json:"go_version"`
	} `json:"build"`
	KAT struct {
		Results  int               `json:"results"`
		Passed   int               `json:"passed"`
		Failures []json.RawMessage `json:"failures"`
		Usable   []string          `json:"usable"`
	} `json:"kat"`
	Selection struct {
		AEAD            string `json:"aead"`
		AEADReason      string `json:"aead_reason"`
		Cached          *bool  `json:"cached"`
		Implementations []struct {
			Cipher, Impl, Reason string
		} `json:"implementations"`
	} `json:"selection"`
	Table *struct {
		Sizes []int `json:"sizes"`
		Rows  []struct {
			Cipher string `json:"cipher"`
			Impl   string `json:"impl"`
			Cells  []struct {
				Size      int       `json:"size"`
				Ops       int64     `json:"ops"`
				ElapsedNS int64     `json:"elapsed_ns"`
				Rate      float64   `json:"bytes_per_second"`
				Trials    []float64 `json:"trials_bytes_per_second"`
				Min       float64   `json:"min_bytes_per_second"`
				Max       float64   `json:"max_bytes_per_second"`
			} `json:"cells"`
		} `json:"rows"`
		Seconds float64 `json:"seconds_per_cell"`
		Trials  int     `json:"trials"`
	} `json:"table"`
	TableState    string     `json:"table_state"`
	TableMeasured *time.Time `json:"table_measured"`
	TableSource   string     `json:"table_source"`
	TableQuality  string     `json:"table_quality"`
	TableMethod   string     `json:"table_method"`
	TableSpread   float64    `json:"table_median_spread"`
	Refining      *struct {
		Round, Rounds int
	} `json:"refining"`
}

// getSpeed fetches /speed with an Accept header and returns status, body and
// headers.
func getSpeed(t testing.TB, ts *testServer, query, accept string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest("GET", ts.URL+"/speed"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b.Bytes(), resp.Header
}

func decodeSpeed(t testing.TB, body []byte) speedJSON {
	t.Helper()
	var v speedJSON
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decoding /speed: %v\n%s", err, body)
	}
	return v
}

// waitSpeedTable polls /speed until the start-up table is measured.
func waitSpeedTable(t testing.TB, ts *testServer) speedJSON {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body, _ := getSpeed(t, ts, "?format=json", "")
		if code != 200 {
			t.Fatalf("GET /speed: %d %s", code, body)
		}
		v := decodeSpeed(t, body)
		switch v.TableState {
		case speedview.TableDone:
			return v
		case speedview.TableMeasuring, speedview.TableRefining:
		default:
			t.Fatalf("table_state %q while waiting for the start-up table", v.TableState)
		}
		if time.Now().After(deadline) {
			t.Fatal("the start-up speed table took over 60 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// usableRows is the number of rows a full table has on this host.
func usableRows(ts *testServer) int {
	n := 0
	for _, c := range kernels.Ciphers() {
		n += len(ts.kat.Usable(c))
	}
	return n
}

// startBenchServer starts a server that measures the full table after
// start-up, and waits for it.
func startBenchServer(t testing.TB) (*testServer, speedJSON) {
	t.Helper()
	start := time.Now()
	ts := startTestServer(t, Config{})
	v := waitSpeedTable(t, ts)
	t.Logf("server start and full table: %s", time.Since(start).Round(time.Millisecond))
	return ts, v
}

func TestSpeedStartupTable(t *testing.T) {
	start := time.Now()
	ts := startTestServer(t, Config{})
	// Straight after start-up the table is being measured: JSON says so and
	// the openssl formats ask to retry.
	code, body, hdr := getSpeed(t, ts, "?format=text", "")
	if fresh := time.Since(start) < quickBudget/2; code == 200 && fresh {
		t.Fatalf("text table served %s after start-up", time.Since(start))
	} else if code != 200 {
		if code != 503 || hdr.Get("Retry-After") == "" || !bytes.Contains(body, []byte(api.CodeNotReady)) {
			t.Fatalf("text before the table: %d Retry-After=%q %s", code, hdr.Get("Retry-After"), body)
		}
		_, body, _ = getSpeed(t, ts, "", "")
		if v := decodeSpeed(t, body); v.TableState != speedview.TableMeasuring || v.Table != nil || v.TableMeasured != nil {
			t.Fatalf("JSON before the table: state %q, table %v", v.TableState, v.Table != nil)
		}
		code, body, _ = getSpeed(t, ts, "", "text/html")
		if code != 200 || !bytes.Contains(body, []byte("being measured")) || !bytes.Contains(body, []byte(`http-equiv="refresh"`)) {
			t.Fatalf("page before the table: %d, says measuring: %v", code, bytes.Contains(body, []byte("being measured")))
		}
	}

	// The quick table comes first, published while the refined one is
	// measured.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, body, _ := getSpeed(t, ts, "", "")
		v := decodeSpeed(t, body)
		if v.TableState == speedview.TableDone {
			t.Fatalf("the refined table came without a quick one published first (quality %q)", v.TableQuality)
		}
		if v.Table == nil {
			if time.Now().After(deadline) {
				t.Fatal("no quick table in 60 s")
			}
			continue
		}
		if v.TableState != speedview.TableRefining || v.TableQuality != speedview.QualityQuick || v.Refining == nil || v.Refining.Rounds != refineTrials ||
			v.Table.Trials != quickTrials || !strings.Contains(v.TableMethod, "median of 3 interleaved trials") {
			t.Fatalf("quick table: state %q quality %q refining %+v trials %d method %q", v.TableState, v.TableQuality, v.Refining, v.Table.Trials, v.TableMethod)
		}
		if code, _, _ := getSpeed(t, ts, "?format=text", ""); code != 200 {
			t.Fatalf("text while refining: %d", code)
		}
		break
	}

	v := waitSpeedTable(t, ts)
	took := time.Since(start)
	checkSpeedSummary(t, ts, v)
	if v.TableQuality != speedview.QualityRefined || v.Refining != nil || v.Table.Trials != refineTrials ||
		v.Table.Seconds != refineTrialTime.Seconds() || !strings.Contains(v.TableMethod, "median of 5 interleaved trials of 2ms per cell in rounds 5ms apart") {
		t.Errorf("refined table: quality %q refining %+v trials %d of %gs, method %q", v.TableQuality, v.Refining, v.Table.Trials, v.Table.Seconds, v.TableMethod)
	}
	t.Logf("start-up table: %d rows in %s after New", len(v.Table.Rows), took.Round(time.Millisecond))
	if v.Host.GOMAXPROCS == 0 || v.Host.Features == nil || v.Build.Version == "" || v.Build.GoVersion == "" {
		t.Errorf("host/build incomplete: %+v %+v", v.Host, v.Build)
	}
	if v.KAT.Results == 0 || v.KAT.Passed != v.KAT.Results || v.KAT.Failures == nil || len(v.KAT.Usable) != usableRows(ts) {
		t.Errorf("kat summary: %+v", v.KAT)
	}
	if v.Selection.AEAD == "" || v.Selection.AEADReason == "" || v.Selection.Cached == nil || len(v.Selection.Implementations) == 0 {
		t.Errorf("selection: %+v", v.Selection)
	}
	if v.TableMeasured == nil || v.TableMeasured.Before(start.Add(-time.Second)) || v.TableSource != speedview.SourceStartup {
		t.Errorf("table_measured %v, table_source %q", v.TableMeasured, v.TableSource)
	}
	if len(v.Table.Rows) != usableRows(ts) {
		t.Errorf("%d rows, want one per usable implementation (%d)", len(v.Table.Rows), usableRows(ts))
	}
	for _, row := range v.Table.Rows {
		if len(row.Cells) != len(selftest.DefaultSizes) {
			t.Fatalf("%s/%s: %d cells", row.Cipher, row.Impl, len(row.Cells))
		}
		for i, c := range row.Cells {
			if c.Size != selftest.DefaultSizes[i] || c.Ops <= 0 || c.ElapsedNS <= 0 {
				t.Errorf("%s/%s cell %d: %+v", row.Cipher, row.Impl, i, c)
			}
			// The cell is its median trial, and says how far the others were.
			rate := float64(c.Ops) * float64(c.Size) / (float64(c.ElapsedNS) / 1e9)
			if len(c.Trials) != refineTrials || c.Min > c.Rate || c.Rate > c.Max || math.Abs(c.Rate-rate) > rate*1e-9 ||
				!slices.Contains(c.Trials, c.Rate) {
				t.Errorf("%s/%s cell %d: rate %g (from ops %g), trials %v, range %g–%g", row.Cipher, row.Impl, i, c.Rate, rate, c.Trials, c.Min, c.Max)
			}
		}
	}
}

func TestSpeedNegotiation(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	for _, tc := range []struct {
		query, accept, want string
	}{
		{"", "", "application/json"},
		{"", "*/*", "application/json"},
		{"", "application/json", "application/json"},
		{"", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "text/html"},
		{"", "application/json;q=0.5, text/html", "text/html"},
		{"", "text/html;q=0.1, application/json", "application/json"},
		{"?format=json", "text/html", "application/json"},
		{"?format=html", "application/json", "text/html"},
	} {
		code, body, hdr := getSpeed(t, ts, tc.query, tc.accept)
		if ct := hdr.Get("Content-Type"); code != 200 || !strings.HasPrefix(ct, tc.want) {
			t.Errorf("GET /speed%s Accept %q: %d %q, want %s\n%.200s", tc.query, tc.accept, code, ct, tc.want, body)
		}
		if !strings.Contains(hdr.Get("Vary"), "Accept") {
			t.Errorf("GET /speed%s: Vary %q", tc.query, hdr.Get("Vary"))
		}
	}
	code, body, _ := getSpeed(t, ts, "?format=xml", "")
	if code != 400 || !bytes.Contains(body, []byte(api.CodeInvalidParameter)) {
		t.Errorf("?format=xml: %d %s", code, body)
	}
}

func TestSpeedSkipped(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	_, body, _ := getSpeed(t, ts, "", "")
	v := decodeSpeed(t, body)
	if v.TableState != speedview.TableSkipped || v.Table != nil || v.TableMeasured != nil || v.Selection.AEAD == "" {
		t.Errorf("skipped: state %q table %v measured %v aead %q", v.TableState, v.Table != nil, v.TableMeasured, v.Selection.AEAD)
	}
	for _, f := range []string{"text", "mr"} {
		code, body, hdr := getSpeed(t, ts, "?format="+f, "")
		var e api.Error
		if err := json.Unmarshal(body, &e); err != nil || code != 503 || e.Code != api.CodeNotReady || !strings.Contains(e.Message, "skipped") {
			t.Errorf("?format=%s while skipped: %d %s", f, code, body)
		}
		// No table is coming: nothing to retry after.
		if ra := hdr.Get("Retry-After"); ra != "" {
			t.Errorf("?format=%s while skipped: Retry-After %q", f, ra)
		}
	}
	code, page, hdr := getSpeed(t, ts, "", "text/html")
	if code != 200 || !bytes.Contains(page, []byte("skip_benchmark")) || bytes.Contains(page, []byte("<polyline")) || hdr.Get("Content-Security-Policy") == "" {
		t.Errorf("page while skipped: %d\n%s", code, page)
	}
}

// opensslRow is a row of openssl speed's table: a name, then one figure per
// size, in 1000s of bytes per second with a "k" suffix (or bytes without).
var opensslFigure = regexp.MustCompile(`^[0-9]+\.[0-9]{2}k?$`)

func TestSpeedText(t *testing.T) {
	ts, v := startBenchServer(t)
	code, body, hdr := getSpeed(t, ts, "?format=text", "text/html")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("?format=text: %d %q", code, hdr.Get("Content-Type"))
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() && sc.Text() != "The 'numbers' are in 1000s of bytes per second processed." {
	}
	if !sc.Scan() {
		t.Fatalf("no table header in\n%s", body)
	}
	head := strings.Fields(sc.Text())
	if len(head) != 1+2*len(v.Table.Sizes) || head[0] != "type" {
		t.Fatalf("type line %q", sc.Text())
	}
	for i, n := range v.Table.Sizes {
		if head[1+2*i] != strconv.Itoa(n) || head[2+2*i] != "bytes" {
			t.Fatalf("type line %q: size %d", sc.Text(), n)
		}
	}
	rows := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 1+len(v.Table.Sizes) {
			t.Fatalf("row %q", sc.Text())
		}
		want := v.Table.Rows[rows].Cipher + "/" + v.Table.Rows[rows].Impl
		if f[0] != want {
			t.Errorf("row %d named %q, want %q", rows, f[0], want)
		}
		for _, fig := range f[1:] {
			if !opensslFigure.MatchString(fig) {
				t.Errorf("row %q: figure %q", sc.Text(), fig)
			}
		}
		rows++
	}
	if rows != len(v.Table.Rows) {
		t.Errorf("%d rows in the text table, %d in JSON", rows, len(v.Table.Rows))
	}
}

func TestSpeedMR(t *testing.T) {
	ts, v := startBenchServer(t)
	code, body, hdr := getSpeed(t, ts, "?format=mr", "")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("?format=mr: %d %q", code, hdr.Get("Content-Type"))
	}
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	wantH := "+H"
	for _, n := range v.Table.Sizes {
		wantH += ":" + strconv.Itoa(n)
	}
	if lines[0] != wantH {
		t.Errorf("first line %q, want %q", lines[0], wantH)
	}
	if len(lines)-1 != len(v.Table.Rows) {
		t.Fatalf("%d +F lines, %d rows", len(lines)-1, len(v.Table.Rows))
	}
	for i, l := range lines[1:] {
		f := strings.Split(l, ":")
		if len(f) != 3+len(v.Table.Sizes) || f[0] != "+F" || f[2] != v.Table.Rows[i].Cipher+"/"+v.Table.Rows[i].Impl {
			t.Errorf("+F line %q", l)
			continue
		}
		for _, x := range f[3:] {
			if bps, err := strconv.ParseFloat(x, 64); err != nil || bps <= 0 {
				t.Errorf("+F line %q: figure %q", l, x)
			}
		}
	}
}

// postRun posts body to /speed/run with token ("" = admin, "-" = none).
func postRun(t testing.TB, ts *testServer, body, token string) (int, []byte, http.Header) {
	t.Helper()
	ct := "application/json"
	if body == "" {
		ct = ""
	}
	return ts.do(t, "POST", "/speed/run", ct, strings.NewReader(body), token)
}

func TestSpeedRun(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})

	for _, tok := range []string{"-", "wrong-token"} {
		code, body, hdr := postRun(t, ts, `{"seconds":0.001}`, tok)
		if code != 401 || !bytes.Contains(body, []byte(api.CodeUnauthenticated)) || hdr.Get("WWW-Authenticate") == "" {
			t.Errorf("run with token %q: %d %s", tok, code, body)
		}
	}

	for _, tc := range []struct{ body, code string }{
		{`{"seconds":4}`, string(api.CodeBadRequest)},
		{`{"seconds":-1}`, string(api.CodeBadRequest)},
		{`{"seconds":3}`, string(api.CodeBadRequest)}, // every cell for 3 s: over the total cap
		{`{"ciphers":["aes-192-gcm"]}`, string(api.CodeBadRequest)},
		{`{"sizes":[17]}`, string(api.CodeBadRequest)}, // CBC needs whole blocks
		{`{"sizes":[0]}`, string(api.CodeBadRequest)},
		{`{"sizes":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}`, string(api.CodeBadRequest)},
		{`{"impl":"all"}`, string(api.CodeBadRequest)},
		{`{"seconds":0.001`, string(api.CodeBadRequest)},
	} {
		code, body, _ := postRun(t, ts, tc.body, "")
		var e api.Error
		if err := json.Unmarshal(body, &e); err != nil || code != 400 || string(e.Code) != tc.code {
			t.Errorf("run %s: %d %s, want 400 %s", tc.body, code, body, tc.code)
		}
	}

	start := time.Now()
	code, body, _ := postRun(t, ts, `{"seconds":0.002,"ciphers":["aes-128-gcm","ChaCha20-Poly1305"],"sizes":[1024,16,1024]}`, "")
	if code != 200 {
		t.Fatalf("run: %d %s", code, body)
	}
	t.Logf("run of 2 ciphers × 2 sizes: %s", time.Since(start).Round(time.Millisecond))
	v := decodeSpeed(t, body)
	want := len(ts.kat.Usable(kernels.AES128GCM)) + len(ts.kat.Usable(kernels.ChaCha20Poly1305))
	if v.TableState != speedview.TableDone || v.TableSource != speedview.SourceAdmin || v.Table == nil || len(v.Table.Rows) != want ||
		len(v.Table.Sizes) != 2 || v.Table.Sizes[0] != 16 || v.Table.Sizes[1] != 1024 {
		t.Fatalf("run result: state %q source %q table %+v", v.TableState, v.TableSource, v.Table)
	}
	if v.Table.Rows[0].Cipher != "AES-128-GCM" || v.Table.Rows[len(v.Table.Rows)-1].Cipher != "ChaCha20-Poly1305" {
		t.Errorf("rows out of order: %+v", v.Table.Rows)
	}
	// The new table is what GET /speed serves from now on, in every format.
	if code, body, _ := getSpeed(t, ts, "?format=mr", ""); code != 200 || !strings.HasPrefix(string(body), "+H:16:1024\n") {
		t.Errorf("mr after the run: %d %s", code, body)
	}
	_, page, _ := getSpeed(t, ts, "", "text/html")
	if n := strings.Count(string(page), "<polyline"); n != want || !bytes.Contains(page, []byte("on an admin&#39;s request")) {
		t.Errorf("page after the run: %d polylines", n)
	}

	// No body: the whole table, timed automatically.
	start = time.Now()
	code, body, _ = postRun(t, ts, "", "")
	if code != 200 {
		t.Fatalf("run without body: %d %s", code, body)
	}
	t.Logf("full run without body: %s (aims at %s)", time.Since(start).Round(time.Millisecond), quickBudget)
	if v := decodeSpeed(t, body); len(v.Table.Rows) != usableRows(ts) || len(v.Table.Sizes) != len(selftest.DefaultSizes) {
		t.Errorf("full run: %d rows, sizes %v", len(v.Table.Rows), v.Table.Sizes)
	}
}

func TestSpeedRunForbidden(t *testing.T) {
	const tok = "reader-token"
	ts := startTestServer(t, Config{
		SkipBenchmark: true,
		Identities:    []IdentityConfig{{Name: "reader", TokenSHA256: fmt.Sprintf("%x", sha256.Sum256([]byte(tok))), Policies: []string{"read"}}},
		Policies:      []PolicyConfig{{Name: "read", Allow: []RuleConfig{{Ops: []string{"encrypt", "keys-read"}, Keys: []string{"*"}}}}},
	})
	code, body, _ := postRun(t, ts, `{"seconds":0.001,"ciphers":["aes-128-gcm"],"sizes":[16]}`, tok)
	if code != 403 || !bytes.Contains(body, []byte(api.CodeForbidden)) {
		t.Errorf("run by a non-admin: %d %s", code, body)
	}
}

func TestSpeedRunConcurrent(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	// A run of about 1.2 s; a second one while it lasts is refused.
	slow := `{"seconds":0.2,"trials":1,"ciphers":["aes-128-gcm"],"sizes":[16,64,256,1024,8192,16384]}`
	var wg sync.WaitGroup
	var firstCode int
	var firstBody []byte
	wg.Add(1)
	go func() {
		defer wg.Done()
		firstCode, firstBody, _ = postRun(t, ts, slow, "")
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, body, _ := getSpeed(t, ts, "", "")
		if decodeSpeed(t, body).TableState == speedview.TableMeasuring {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first run never showed as measuring")
		}
		time.Sleep(5 * time.Millisecond)
	}
	code, body, hdr := postRun(t, ts, `{"seconds":0.001,"ciphers":["aes-128-gcm"],"sizes":[16]}`, "")
	var e api.Error
	if err := json.Unmarshal(body, &e); err != nil || code != 409 || e.Code != api.CodeBusy || !strings.Contains(e.Message, "in progress") {
		t.Errorf("second run: %d %s", code, body)
	}
	if ra, err := strconv.Atoi(hdr.Get("Retry-After")); err != nil || ra < 1 || ra > 5 {
		t.Errorf("second run: Retry-After %q", hdr.Get("Retry-After"))
	}
	// While it runs, the openssl formats ask to retry too.
	if code, _, hdr := getSpeed(t, ts, "?format=text", ""); code != 503 || hdr.Get("Retry-After") == "" {
		t.Errorf("text during the first run: %d Retry-After %q", code, hdr.Get("Retry-After"))
	}
	wg.Wait()
	if firstCode != 200 {
		t.Fatalf("first run: %d %s", firstCode, firstBody)
	}
	if code, body, _ := postRun(t, ts, `{"seconds":0.001,"ciphers":["aes-128-gcm"],"sizes":[16]}`, ""); code != 200 {
		t.Errorf("run after the first ended: %d %s", code, body)
	}
}

// checkSpeedSummary checks that /speed opens with the summary, in the JSON
// and on the page, and that its figures are the table's cells of the AEAD
// and implementation in use, with their ranges, and its ratio to Go's
// own implementation theirs.
func checkSpeedSummary(t *testing.T, ts *testServer, v speedJSON) {
	t.Helper()
	_, body, _ := getSpeed(t, ts, "", "")
	if !bytes.HasPrefix(body, []byte(`{"summary":{`)) {
		t.Fatalf("the JSON does not open with the summary: %.80s", body)
	}
	sum := decodeSpeed(t, body).Summary
	impl := ""
	for _, im := range v.Selection.Implementations {
		if im.Cipher == v.Selection.AEAD {
			impl = im.Impl
		}
	}
	if sum == nil || sum.AEAD != v.Selection.AEAD || sum.Impl != impl || sum.Source != "table" || sum.Reason == "" || len(sum.Cells) != 2 {
		t.Fatalf("summary %+v; selection %s/%s", sum, v.Selection.AEAD, impl)
	}
	cell := func(impl string, size int) (rate, lo, hi float64) {
		for _, r := range v.Table.Rows {
			if strings.EqualFold(r.Cipher, sum.AEAD) && r.Impl == impl {
				for _, c := range r.Cells {
					if c.Size == size {
						return c.Rate, c.Min, c.Max
					}
				}
			}
		}
		t.Fatalf("no table cell %s/%s at %d", sum.AEAD, impl, size)
		return
	}
	for i, size := range []int{1024, 16384} {
		rate, lo, hi := cell(sum.Impl, size)
		if c := sum.Cells[i]; c.Size != size || c.Rate != rate || c.Min != lo || c.Max != hi {
			t.Errorf("summary cell %d: %+v, the table's %g (%g–%g)", i, c, rate, lo, hi)
		}
	}
	if sum.GoImpl != "" {
		ours, _, _ := cell(sum.Impl, 16384)
		theirs, _, _ := cell(sum.GoImpl, 16384)
		if math.Abs(sum.VsGo-ours/theirs) > 1e-9 {
			t.Errorf("vs_go %g, the table's cells give %g", sum.VsGo, ours/theirs)
		}
	} else if sum.Impl != "stdlib" && sum.Impl != "xcrypto" {
		t.Errorf("no comparison with Go's implementation for %s/%s", sum.AEAD, sum.Impl)
	}
	_, page, _ := getSpeed(t, ts, "", "text/html")
	glance, chart := bytes.Index(page, []byte("<h2>At a glance</h2>")), bytes.Index(page, []byte("<svg"))
	if glance < 0 || chart >= 0 && chart < glance || !bytes.Contains(page, []byte("This host seals new data with "+strings.ToUpper(sum.AEAD)+" ("+sum.Impl+")")) {
		t.Errorf("the page does not open with the summary (at %d, the first chart at %d)", glance, chart)
	}
}

// With compare_openssl, the openssl binary measures the AEAD in use after
// the quick table, and /speed's summary sets this host's 16 KiB figure
// against it. A stand-in for openssl prints fixed figures, so that the
// ratio is known.
func TestSpeedCompareOpenSSL(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "openssl")
	// 1000 MB/s at every size, for whatever -bytes asks (openssl's -mr
	// figures are kept as operations in one second: within 1e-4 of it).
	script := "#!/bin/sh\n" +
		"[ \"$1\" = version ] && { echo 'OpenSSL 9.9.9 (a stand-in)'; exit 0; }\n" +
		"while [ $# -gt 0 ]; do [ \"$1\" = -bytes ] && n=$2; [ \"$1\" = -evp ] && c=$2; shift; done\n" +
		"echo \"+H:$n\"; echo \"+F:1:$(echo $c | tr a-z A-Z):1000000000.00\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ts := startTestServer(t, Config{CompareOpenSSL: bin})
	type cmp struct {
		Summary struct {
			AEAD  string `json:"aead"`
			Cells []struct {
				Size int
				Rate float64 `json:"bytes_per_second"`
			} `json:"cells"`
			OpenSSL *struct {
				Version string `json:"version"`
				Cells   []struct {
					Size int
					Rate float64 `json:"bytes_per_second"`
				} `json:"cells"`
			} `json:"openssl"`
			VsOpenSSL float64 `json:"vs_openssl"`
		} `json:"summary"`
	}
	var v cmp
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, body, _ := getSpeed(t, ts, "", "")
		v = cmp{}
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		if v.Summary.OpenSSL != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no OpenSSL comparison within 60 s")
		}
	}
	o := v.Summary.OpenSSL
	if o.Version != "OpenSSL 9.9.9 (a stand-in)" || len(o.Cells) != 2 || o.Cells[0].Size != 1024 || o.Cells[1].Size != 16384 || math.Abs(o.Cells[1].Rate/1e9-1) > 1e-4 {
		t.Fatalf("openssl's side: %+v", o)
	}
	var ours float64
	for _, c := range v.Summary.Cells {
		if c.Size == 16384 {
			ours = c.Rate
		}
	}
	if want := ours / o.Cells[1].Rate; ours == 0 || math.Abs(v.Summary.VsOpenSSL/want-1) > 1e-9 {
		t.Errorf("vs_openssl %v, want %v", v.Summary.VsOpenSSL, want)
	}
	_, page, _ := getSpeed(t, ts, "", "text/html")
	if !bytes.Contains(page, []byte("the host&#39;s OpenSSL (OpenSSL 9.9.9 (a stand-in))")) {
		t.Errorf("the page's summary does not compare with OpenSSL")
	}
}
