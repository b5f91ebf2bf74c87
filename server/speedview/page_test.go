package speedview

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cipherd/cipherd/internal/buildinfo"
	"github.com/cipherd/cipherd/internal/chartaxis"
	"github.com/cipherd/cipherd/kernels"
	"github.com/cipherd/cipherd/selftest"
)

// measuredSnapshot measures the full table as the server does after
// start-up, every implementation that passed the self-test at openssl's
// sizes, in the refined table's five interleaved trials (here of 2 ms, in
// rounds 5 ms apart), after the self-test and a measured quick profile, and
// returns it as /speed shows it once done.
func measuredSnapshot(t testing.TB) *Snapshot {
	t.Helper()
	kat := selftest.RunKATs(selftest.KATConfig{})
	if err := kat.Err(); err != nil {
		t.Fatal(err)
	}
	sel, err := selftest.Select(context.Background(), selftest.SelectConfig{KAT: kat})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := selftest.Speed(context.Background(), selftest.SpeedConfig{
		Impl: "all", KAT: kat, Sizes: selftest.DefaultSizes,
		Trials: 5, Duration: 2 * time.Millisecond, RoundGap: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("full table: %s", time.Since(start).Round(time.Millisecond))
	return &Snapshot{
		Host: selftest.Host(), Build: buildinfo.Get(), KAT: kat, Selection: sel,
		Table: &Table{Result: res, Took: time.Since(start), Source: SourceStartup, Quality: QualityRefined},
		State: TableDone,
	}
}

// skippedSelection runs the self-test and selects the ciphers as a server
// that skips the benchmark does: by order of preference, measuring nothing.
func skippedSelection(t testing.TB) (*selftest.KATReport, *selftest.Selection) {
	t.Helper()
	kat := selftest.RunKATs(selftest.KATConfig{})
	if err := kat.Err(); err != nil {
		t.Fatal(err)
	}
	sel, err := selftest.Select(context.Background(), selftest.SelectConfig{KAT: kat, SkipBenchmark: true})
	if err != nil {
		t.Fatal(err)
	}
	return kat, sel
}

// newApp serves snap at /speed as package server does: the format
// negotiated, then the page or the JSON report.
func newApp(snap *Snapshot) *fiber.App {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/speed", func(c *fiber.Ctx) error {
		format, err := Negotiate(c)
		if err != nil {
			return fiber.NewError(fiber.StatusBadRequest, err.Error())
		}
		if format == FormatHTML {
			return ServePage(c, snap, time.Now())
		}
		return c.JSON(NewReport(snap))
	})
	// The fleet page of three replicas of this host, one of them on a
	// host with another selection.
	app.Get("/speed/fleet", func(c *fiber.Ctx) error {
		v := &FleetView{Shared: true, PinnedKeys: map[string]int{"aes-256-gcm": 2}, UnpinnedKeys: 3, MaxAge: 90}
		for i, id := range []string{"0123456789ab", "123456789abc", "23456789abcd"} {
			h := NewHost(snap, id, "replica-with-a-long-host-name-"+id)
			if i == 2 {
				h.AEAD, h.Implementations = "chacha20-poly1305", map[string]string{"chacha20-poly1305": "avx2"}
			}
			h.AgeSeconds, h.Self = float64(i*7), i == 0
			v.Hosts = append(v.Hosts, *h)
		}
		v.Finish()
		return ServeFleetPage(c, v)
	})
	return app
}

// get fetches target from app with an Accept header and returns status,
// body and headers.
func get(t testing.TB, app *fiber.App, target, accept string) (int, []byte, http.Header) {
	t.Helper()
	req := httptest.NewRequest("GET", target, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body, resp.Header
}

func TestPage(t *testing.T) {
	snap := measuredSnapshot(t)
	res, sel := snap.Table.Result, snap.Selection
	code, body, hdr := get(t, newApp(snap), "/speed", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
		t.Fatalf("page: %d %q", code, hdr.Get("Content-Type"))
	}
	csp := hdr.Get("Content-Security-Policy")
	for _, d := range []string{"default-src 'none'", "style-src 'unsafe-inline'", "img-src data:"} {
		if !strings.Contains(csp, d) {
			t.Errorf("CSP %q lacks %q", csp, d)
		}
	}
	page := string(body)
	// One small chart per cipher family with rows, each on its own scale.
	families := 0
	for _, f := range cipherFamilies {
		for _, row := range res.Rows {
			if slices.Contains(f.ciphers, row.Cipher) {
				families++
				if !strings.Contains(page, ">"+htmlText(f.name)+" <tspan class=\"unit\">") {
					t.Errorf("no chart titled %q", f.name)
				}
				break
			}
		}
	}
	if n := strings.Count(page, "<svg class=\"chart\""); n != families || n < 2 {
		t.Errorf("%d chart <svg>s, want one per family (%d)", n, families)
	}
	// The implementations in use stand out: wide and opaque, the others
	// narrow and faded.
	if n := strings.Count(page, `<g class="series chosen" opacity="1">`+"\n"+`<polyline`); n != len(sel.Implementations)+countSpeedOnly(snap.KAT) {
		t.Errorf("%d highlighted lines, want one per cipher (%d)", n, len(sel.Implementations)+countSpeedOnly(snap.KAT))
	}
	if n := strings.Count(page, `stroke-width="3"`); n < len(sel.Implementations) {
		t.Errorf("%d wide lines", n)
	}
	// Under purego a family may have no implementation besides the one in
	// use: a faded line is due only where the table has more rows.
	if len(res.Rows) > len(sel.Implementations)+countSpeedOnly(snap.KAT) && !strings.Contains(page, `<g class="series" opacity="0.55">`) {
		t.Errorf("no faded line for the other implementations")
	}
	if !strings.Contains(page, `title="median of 5 trials; range `) {
		t.Errorf("the figures do not say how far their trials were")
	}
	if n := strings.Count(page, "<polyline"); n != len(res.Rows) {
		t.Errorf("%d polylines, want one per row (%d)", n, len(res.Rows))
	}
	for _, bad := range []string{"http://", "https://", "<script", "src=", "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	for _, want := range []string{
		sel.AEADName, sel.AEADReason, snap.Host.Brand, "Self-test", "known-answer runs passed",
		"after start-up", "message size (log scale)", "16 KiB", "The full table is measured.",
		"median of 5 interleaved trials of 2ms per cell in rounds 5ms apart",
	} {
		if !strings.Contains(page, htmlText(want)) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, row := range res.Rows {
		if !strings.Contains(page, ">"+row.Name+" <tspan class=\"impl\">"+row.Impl+"</tspan>") {
			t.Errorf("legend lacks %s/%s", row.Name, row.Impl)
		}
	}
	if strings.Contains(page, `http-equiv="refresh"`) {
		t.Error("a finished page reloads itself")
	}
}

// htmlText escapes s as html/template writes text.
func htmlText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;", "+", "&#43;").Replace(s)
}

func TestChart(t *testing.T) {
	kat, sel := skippedSelection(t)
	chosen := sel.Implementation(kernels.AES128GCM).Name()
	rows := style([]series{
		{cipher: kernels.AES128GCM, Name: "AES-128-GCM", Impl: "other", sizes: []int{16, 64, 256}, rates: []float64{1e8, 4e8, 1.6e9}},
		{cipher: kernels.AES128GCM, Name: "AES-128-GCM", Impl: chosen, sizes: []int{16, 64, 256}, rates: []float64{2e8, 8e8, 2.4e9}},
	}, sel, kat)
	if rows[0].Selected || rows[0].Dash == "" || !rows[1].Selected || rows[1].Dash != "" || rows[0].Color != rows[1].Color {
		t.Errorf("styles: %+v", rows)
	}
	ch := newChart("AES-GCM", rows)
	if ch.Unit != "GB/s" {
		t.Errorf("unit %s for a 2.4 GB/s peak", ch.Unit)
	}
	// x is log-scaled over 16 … 16384: equal ratios, equal steps.
	m := ch.Lines[1].Marks
	if d1, d2 := m[1].X-m[0].X, m[2].X-m[1].X; math.Abs(d1-d2) > 0.2 || d1 <= 0 {
		t.Errorf("x steps %g and %g for ×4 each", d1, d2)
	}
	if first, last := ch.XTicks[0], ch.XTicks[len(ch.XTicks)-1]; first.Label != "16 B" || last.Label != "16 KiB" || first.Pos <= ch.X0 || last.Pos >= ch.X1 {
		t.Errorf("x ticks %+v", ch.XTicks)
	}
	// y is linear from zero, and the top tick is above the peak.
	top := ch.YTicks[len(ch.YTicks)-1]
	if ch.YTicks[0].Pos != ch.Y1 || ch.YTicks[0].Label != "0" || top.Pos != ch.Y0 || top.Label != "2.5" {
		t.Errorf("y ticks %+v", ch.YTicks)
	}
	if y := m[2].Y; y < ch.Y0 || y > ch.Y1 || math.Abs((ch.Y1-y)/(ch.Y1-ch.Y0)-2.4/2.5) > 0.01 {
		t.Errorf("2.4 GB/s drawn at y=%g", y)
	}
	nv := newNumbers(rows)
	if !nv.HasBest || nv.Rows[0].Cells[0].Best || !nv.Rows[1].Cells[0].Best || nv.Rows[1].Cells[2].Text != "2,400" {
		t.Errorf("numbers %+v", nv.Rows)
	}
	for _, tc := range []struct{ span, want float64 }{{0, 1}, {7.3, 2}, {12, 2.5}, {3.4, 1}, {0.9, 0.2}, {480, 100}} {
		if got := chartaxis.NiceStep(tc.span, 5); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("niceStep(%g) = %g, want %g", tc.span, got, tc.want)
		}
	}
}

// countSpeedOnly is the number of speed-only ciphers with a usable
// implementation: their most preferred one is highlighted though the
// service never uses it.
func countSpeedOnly(kat *selftest.KATReport) int {
	n := 0
	for _, c := range kernels.Ciphers() {
		if c.SpeedOnly() && len(kat.Usable(c)) > 0 {
			n++
		}
	}
	return n
}

// Each figure of the chart carries its trials' range as an error bar
// around its dot, the y axis reaches the top of the highest bar, and a
// figure of one trial has none.
func TestChartErrorBars(t *testing.T) {
	rows := []series{{Name: "AES-256-GCM", Impl: "a", Selected: true, Color: "#000",
		sizes: []int{1024, 16384}, rates: []float64{2e9, 5e9}, lows: []float64{1.5e9, 5e9}, highs: []float64{2.2e9, 6.5e9}}}
	ch := newChart("t", rows)
	m := ch.Lines[0].Marks
	if len(m) != 2 || !m[0].Bar || !m[1].Bar {
		t.Fatalf("marks %+v", m)
	}
	for i, mk := range m {
		if !(mk.YHi < mk.Y && mk.Y <= mk.YLo) {
			t.Errorf("mark %d: bar %g–%g around %g", i, mk.YHi, mk.YLo, mk.Y)
		}
		if mk.YHi < ch.Y0 {
			t.Errorf("mark %d: the bar's top %g is above the plot's %g", i, mk.YHi, ch.Y0)
		}
	}
	if !strings.Contains(m[0].Title, "trials 1 500–2 200") && !strings.Contains(m[0].Title, "trials 1,500–2,200") {
		t.Errorf("the tooltip does not give the range: %q", m[0].Title)
	}
	one := []series{{Name: "x", Impl: "b", Color: "#000", sizes: []int{1024}, rates: []float64{1e9}, lows: []float64{1e9}, highs: []float64{1e9}}}
	if mk := newChart("t", one).Lines[0].Marks[0]; mk.Bar {
		t.Errorf("a figure of one trial has a bar: %+v", mk)
	}

	// A measured table of five trials per cell: the page draws the bars.
	code, body, _ := get(t, newApp(measuredSnapshot(t)), "/speed", "text/html")
	if code != 200 || !strings.Contains(string(body), `<path class="err" d="M`) {
		t.Errorf("the page of a measured table: %d, no error bar", code)
	}
}

// The table of figures shows each cell's trial range as ± half of it, and
// marks a cell whose trials ranged over unsteadySpread as measured under
// load.
func TestNumbersSpread(t *testing.T) {
	nv := newNumbers([]series{{cipher: kernels.AES256GCM, Name: "AES-256-GCM", Impl: "a",
		sizes: []int{1024, 16384}, rates: []float64{1e9, 2e9}, lows: []float64{0.99e9, 1.7e9}, highs: []float64{1.03e9, 2.2e9},
		trials: []string{"", ""}}})
	c := nv.Rows[0].Cells
	if c[0].Spread != "±2 %" || c[0].Unsteady || c[1].Spread != "±12 %" || !c[1].Unsteady || !nv.HasUnsteady {
		t.Fatalf("cells %+v, has unsteady %v", c, nv.HasUnsteady)
	}
	one := newNumbers([]series{{cipher: kernels.AES256GCM, Name: "x", Impl: "a", sizes: []int{1024}, rates: []float64{1e9}, lows: []float64{1e9}, highs: []float64{1e9}}})
	if c := one.Rows[0].Cells[0]; c.Spread != "" || c.Unsteady || one.HasUnsteady {
		t.Fatalf("a cell of one trial: %+v", c)
	}
	code, body, _ := get(t, newApp(measuredSnapshot(t)), "/speed", "text/html")
	if code != 200 || !strings.Contains(string(body), `<small class="spread`) || !strings.Contains(string(body), "± half the range of its trials") {
		t.Errorf("the page of a measured table: %d, no spread under the figures", code)
	}
}
