package speedview

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cipherd/cipherd/internal/buildinfo"
	"github.com/cipherd/cipherd/internal/chartaxis"
	"github.com/cipherd/cipherd/kernels"
	"github.com/cipherd/cipherd/selftest"
)

// PageCSP, the Content-Security-Policy of the page, lets it load nothing
// at all: its CSS is inline, its chart is inline SVG, and it runs no
// script.
const PageCSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// ServePage answers c with the HTML page of snap, generated at now, and
// the headers that keep it self-contained: a Content-Security-Policy that
// lets it load nothing, no sniffing, no referrer, no caching.
func ServePage(c *fiber.Ctx, snap *Snapshot, now time.Time) error {
	var b bytes.Buffer
	if err := pageTemplate().Execute(&b, newPageView(snap, now)); err != nil {
		return err
	}
	setPageHeaders(c)
	return c.Send(b.Bytes())
}

// setPageHeaders sets the headers of an HTML page that loads nothing, as
// ServePage sends it: a Content-Security-Policy that allows inline CSS and
// SVG and nothing else, no sniffing, no referrer, no caching.
func setPageHeaders(c *fiber.Ctx) {
	c.Set(fiber.HeaderContentSecurityPolicy, PageCSP)
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderReferrerPolicy, "no-referrer")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
}

// pageView is what the template shows.
type pageView struct {
	State      string
	Refresh    bool // reload while measuring
	Status     string
	ChartTitle string
	RunNote    string
	Charts     []*chartView // one per cipher family
	Numbers    *numbersView
	Sel        *selftest.Selection
	AEADImpl   string
	Profile    string
	KAT        katSummary
	KATVerdict string
	CipherN    int
	Host       selftest.HostReport
	Quota      string
	Build      buildinfo.Info
	Generated  string
	Summary    *summary
	Glance     string // the summary in words
}

// newPageView returns the view of snap, generated at now.
func newPageView(snap *Snapshot, now time.Time) *pageView {
	state, wait, sel := snap.State, snap.Wait, snap.Selection
	v := &pageView{
		State:     state,
		Refresh:   state == TableMeasuring,
		Sel:       sel,
		KAT:       summarizeKAT(snap.KAT),
		CipherN:   len(kernels.Ciphers()),
		Host:      snap.Host,
		Quota:     "none",
		Build:     snap.Build,
		Generated: when(now, now),
	}
	if snap.Host.CPUQuota > 0 {
		v.Quota = strconv.FormatFloat(snap.Host.CPUQuota, 'g', 3, 64) + " cores"
	}
	if im := sel.Implementation(sel.AEAD); im != nil {
		v.AEADImpl = im.Name()
	}
	v.KATVerdict = "PASS"
	if len(v.KAT.Failures) > 0 {
		v.KATVerdict = "DEGRADED"
	}
	switch {
	case sel.Cached:
		v.Profile = fmt.Sprintf("Quick profile reused from the cache (same CPU, binary and GOMAXPROCS), measured %s in %s.", when(sel.Measured, now), roundDuration(sel.ProfileTime))
	case !sel.Measured.IsZero():
		v.Profile = fmt.Sprintf("Quick profile measured fresh at start-up, %s, in %s.", when(sel.Measured, now), roundDuration(sel.ProfileTime))
	default:
		v.Profile = "No quick profile: the benchmark is skipped by configuration, so the order of preference decides."
	}
	if len(sel.Profile) > 0 {
		v.Profile += " The figures under “why” are this profile's, from its short trials; the table's are measured apart, in longer trials, and differ from them as much as the load on the host changed in between."
	}

	var rows []series
	t := snap.Table
	var res *selftest.SpeedResult
	if t != nil {
		res = t.Result
	}
	if v.Summary = summarize(sel, res, snap.OpenSSL); v.Summary != nil {
		v.Glance = v.Summary.sentence()
	}
	if t != nil {
		rows = tableSeries(t.Result, sel, snap.KAT)
		v.ChartTitle = "Throughput by message size: every implementation that passed the self-test"
		quality := ""
		if t.Quality == QualityQuick {
			quality = "the quick table, "
		}
		v.RunNote = fmt.Sprintf("Measured %s, %s%s, in %s: %s.",
			map[string]string{SourceStartup: "after start-up", SourceAdmin: "on an admin's request"}[t.Source],
			quality, when(t.Result.Started, now), roundDuration(t.Took), tableMethod(t.Result))
		if sp := medianSpread(t.Result); sp > 0 {
			v.RunNote += fmt.Sprintf(" The trials of a cell ranged over %.1f %% of its figure (median over the cells); the bars on the charts and the ± under the figures below give each cell's range.", sp*100)
		}
	} else if len(sel.Profile) > 0 {
		rows = profileSeries(sel, snap.KAT)
		v.ChartTitle = "Quick profile (the selection's median of short trials)"
		v.RunNote = v.Profile
	}
	switch state {
	case TableDone:
		v.Status = "The full table is measured."
	case TableRefining:
		v.Status = fmt.Sprintf("Showing the quick table; the refined one is being measured (round %d of %d done, about %d s left). This page reloads itself.", snap.Refine.Round, snap.Refine.Rounds, wait)
		v.Refresh = true
	case TableMeasuring:
		v.Status = fmt.Sprintf("The full table is being measured (about %d s left). ", wait)
		if t != nil {
			v.Status += "Showing the previous table meanwhile; this page reloads itself."
		} else {
			v.Status += "Showing the quick profile meanwhile; this page reloads itself."
		}
	case TableFailed:
		v.Status = "The full table could not be measured (the server log says why). An admin can retry with POST /speed/run."
	default:
		v.Status = "The benchmark is skipped by configuration (skip_benchmark). An admin can run it with POST /speed/run."
	}
	if len(rows) > 0 {
		for _, f := range cipherFamilies {
			var in []series
			for _, r := range rows {
				if slices.Contains(f.ciphers, r.cipher) {
					in = append(in, r)
				}
			}
			if len(in) > 0 {
				v.Charts = append(v.Charts, newChart(f.name, in))
			}
		}
		v.Numbers = newNumbers(rows)
	}
	return v
}

// cipherFamilies groups the ciphers into the page's small charts, each on
// its own scale, so that a family's implementations can be told apart
// however far the families' speeds are from one another.
var cipherFamilies = []struct {
	name    string
	ciphers []kernels.Cipher
}{
	{"AES-GCM", []kernels.Cipher{kernels.AES128GCM, kernels.AES256GCM}},
	{"ChaCha20-Poly1305 and XChaCha20-Poly1305", []kernels.Cipher{kernels.ChaCha20Poly1305, kernels.XChaCha20Poly1305}},
	{"AES-CTR", []kernels.Cipher{kernels.AES128CTR, kernels.AES256CTR}},
	{"ChaCha20", []kernels.Cipher{kernels.ChaCha20}},
	{"Block modes (speed comparison only)", []kernels.Cipher{kernels.AES128CBC, kernels.AES256CBC, kernels.AES256IGE}},
}

// series is one cipher × implementation: its throughput at each size.
type series struct {
	cipher   kernels.Cipher
	Name     string // openssl's display name
	Impl     string
	Selected bool // the implementation the service uses (or prefers) for the cipher
	Color    string
	Dash     string // SVG stroke-dasharray; "" is solid
	sizes    []int
	rates    []float64 // bytes per second
	lows     []float64 // per size: the slowest trial (the rate itself for one trial)
	highs    []float64 // per size: the fastest trial
	trials   []string  // per size: how the figure was measured, for its tooltip
}

// tableSeries returns the rows of res, styled against sel and kat.
func tableSeries(res *selftest.SpeedResult, sel *selftest.Selection, kat *selftest.KATReport) []series {
	var out []series
	for _, row := range res.Rows {
		s := series{cipher: row.Cipher, Name: row.Name, Impl: row.Impl}
		for _, cell := range row.Cells {
			s.sizes = append(s.sizes, cell.Size)
			s.rates = append(s.rates, cell.BytesPerSecond())
			lo, hi := cell.BytesPerSecond(), cell.BytesPerSecond()
			if len(cell.Trials) > 1 && cell.Min > 0 && cell.Max > 0 {
				lo, hi = cell.Min, cell.Max
			}
			s.lows, s.highs = append(s.lows, lo), append(s.highs, hi)
			how := ""
			if len(cell.Trials) > 1 {
				how = fmt.Sprintf("median of %d trials; range %s–%s MB/s", len(cell.Trials), formatMBps(cell.Min), formatMBps(cell.Max))
			}
			s.trials = append(s.trials, how)
		}
		out = append(out, s)
	}
	return style(out, sel, kat)
}

// profileSeries returns the quick profile of sel, styled against sel and
// kat.
func profileSeries(sel *selftest.Selection, kat *selftest.KATReport) []series {
	var out []series
	for _, p := range sel.Profile {
		c, err := kernels.ParseCipher(p.Cipher)
		if err != nil {
			continue
		}
		i := slices.IndexFunc(out, func(s series) bool { return s.cipher == c && s.Impl == p.Impl })
		if i < 0 {
			out = append(out, series{cipher: c, Name: c.DisplayName(), Impl: p.Impl})
			i = len(out) - 1
		}
		out[i].sizes = append(out[i].sizes, p.Size)
		out[i].rates = append(out[i].rates, p.BytesPerSecond)
		lo, hi := p.BytesPerSecond, p.BytesPerSecond
		if p.Min > 0 && p.Max > 0 {
			lo, hi = p.Min, p.Max
		}
		out[i].lows, out[i].highs = append(out[i].lows, lo), append(out[i].highs, hi)
	}
	return style(out, sel, kat)
}

// cipherColors gives each cipher its colour, related ciphers related hues:
// AES-GCM blues, AES-CTR greens, the ChaCha family warm colours, the
// speed-only block modes violets and grey.
var cipherColors = map[kernels.Cipher]string{
	kernels.AES128GCM:         "#2563eb",
	kernels.AES256GCM:         "#172f7a",
	kernels.AES128CTR:         "#16a34a",
	kernels.AES256CTR:         "#0f5132",
	kernels.ChaCha20:          "#e8930c",
	kernels.ChaCha20Poly1305:  "#dc2626",
	kernels.XChaCha20Poly1305: "#a21caf",
	kernels.AES128CBC:         "#8b5cf6",
	kernels.AES256CBC:         "#4c1d95",
	kernels.AES256IGE:         "#6b7280",
}

// implDashes draws a cipher's other implementations.
var implDashes = []string{"7 4", "2 3", "9 3 2 3"}

// style marks the implementation sel chose for each cipher (for a
// speed-only cipher, its most preferred one that passed kat), draws it solid
// and the others dashed.
func style(rows []series, sel *selftest.Selection, kat *selftest.KATReport) []series {
	for i := range rows {
		r := &rows[i]
		r.Color = cipherColors[r.cipher]
		if r.Color == "" {
			r.Color = "#374151"
		}
		if im := sel.Implementation(r.cipher); im != nil {
			r.Selected = im.Name() == r.Impl
		} else if usable := kat.Usable(r.cipher); len(usable) > 0 {
			r.Selected = usable[0].Name() == r.Impl
		}
	}
	others := map[kernels.Cipher]int{}
	for i := range rows {
		if r := &rows[i]; !r.Selected {
			r.Dash = implDashes[others[r.cipher]%len(implDashes)]
			others[r.cipher]++
		}
	}
	return rows
}

// Chart geometry, in SVG user units: a small chart per cipher family, the
// plot over the whole width, the legend under it in two columns.
const (
	chartWidth   = 560
	chartPlotX0  = 58
	chartPlotX1  = 544
	chartPlotY0  = 34
	chartPlotY1  = 244
	chartLegendH = 19
	chartLegendW = 243 // one legend column
	chartPad     = 12  // between the plot's edge and the first and last size
)

// Line styles: the implementation the service uses is drawn wide and
// opaque with its points; the others narrow, dashed and faded, so that
// what runs stands out and the rest stays readable behind it.
const (
	selectedWidth = 3
	otherWidth    = 1.5
	otherOpacity  = 0.55
)

type chartView struct {
	Title          string
	Width, Height  int
	X0, X1, Y0, Y1 float64
	XMid, YMid     float64
	XTicks, YTicks []chartTick
	Unit           string
	Lines          []chartLine
}

type chartTick struct {
	Pos   float64
	Label string
}

type chartLine struct {
	series
	Width            float64
	Opacity          float64
	Points           string
	Marks            []chartMark
	LegendX, LegendY float64
}

type chartMark struct {
	X, Y  float64
	Title string
	// YLo and YHi are the ends of the error bar, the range of the
	// figure's trials; Bar is false when they coincide with Y.
	YLo, YHi float64
	Bar      bool
}

// newChart draws throughput against message size for one family: a log₂ x
// axis over openssl's sizes (16 … 16384, widened to any others measured)
// and a linear y axis from zero to the family's peak. The lines of the
// implementations in use are drawn last, on top.
func newChart(title string, rows []series) *chartView {
	ch := &chartView{Title: title, Width: chartWidth, X0: chartPlotX0, X1: chartPlotX1, Y0: chartPlotY0, Y1: chartPlotY1}
	legendRows := (len(rows) + 1) / 2
	ch.Height = int(chartPlotY1) + 56 + legendRows*chartLegendH
	ch.XMid, ch.YMid = (ch.X0+ch.X1)/2, (ch.Y0+ch.Y1)/2

	sizes := slices.Clone(selftest.DefaultSizes)
	peak := 0.0
	for _, r := range rows {
		sizes = append(sizes, r.sizes...)
		for _, v := range r.rates {
			peak = max(peak, v)
		}
		for _, v := range r.highs {
			peak = max(peak, v)
		}
	}
	slices.Sort(sizes)
	sizes = slices.Compact(sizes)
	lo, hi := math.Log2(float64(sizes[0])), math.Log2(float64(sizes[len(sizes)-1]))
	x := func(size int) float64 {
		if hi == lo {
			return ch.XMid
		}
		return chartaxis.Round1(ch.X0 + chartPad + (math.Log2(float64(size))-lo)/(hi-lo)*(ch.X1-ch.X0-2*chartPad))
	}
	for _, n := range sizes {
		ch.XTicks = append(ch.XTicks, chartTick{Pos: x(n), Label: sizeLabel(n)})
	}

	unit, scale := "MB/s", 1e6
	if peak >= 1e9 {
		unit, scale = "GB/s", 1e9
	}
	ch.Unit = unit
	step := chartaxis.NiceStep(peak/scale, 5)
	top := math.Max(step, math.Ceil(peak/scale/step-1e-9)*step)
	y := func(bps float64) float64 { return chartaxis.Round1(ch.Y1 - bps/scale/top*(ch.Y1-ch.Y0)) }
	for i := 0; float64(i)*step <= top+step/1e6; i++ {
		v := float64(i) * step
		ch.YTicks = append(ch.YTicks, chartTick{Pos: y(v * scale), Label: strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)})
	}

	for i, r := range rows {
		l := chartLine{series: r, Width: otherWidth, Opacity: otherOpacity,
			LegendX: ch.X0 + float64(i%2)*chartLegendW, LegendY: ch.Y1 + 56 + float64(i/2)*chartLegendH}
		if r.Selected {
			l.Width, l.Opacity = selectedWidth, 1
		}
		var pts []string
		for j, n := range r.sizes {
			px, py := x(n), y(r.rates[j])
			pts = append(pts, fmt.Sprintf("%g,%g", px, py))
			m := chartMark{X: px, Y: py, YLo: py, YHi: py,
				Title: fmt.Sprintf("%s %s, %d bytes: %s MB/s", r.Name, r.Impl, n, formatMBps(r.rates[j]))}
			if j < len(r.lows) && j < len(r.highs) {
				m.YLo, m.YHi = y(r.lows[j]), y(r.highs[j])
				m.Bar = m.YLo-m.YHi >= 1 // a bar under a pixel is the dot
				if m.Bar {
					m.Title += fmt.Sprintf(" (trials %s–%s)", formatMBps(r.lows[j]), formatMBps(r.highs[j]))
				}
			}
			l.Marks = append(l.Marks, m)
		}
		l.Points = strings.Join(pts, " ")
		ch.Lines = append(ch.Lines, l)
	}
	// Draw order: the others first, the implementations in use on top.
	slices.SortStableFunc(ch.Lines, func(a, b chartLine) int {
		switch {
		case a.Selected == b.Selected:
			return 0
		case b.Selected:
			return -1
		}
		return 1
	})
	return ch
}

func sizeLabel(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return strconv.Itoa(n/1024) + " KiB"
	}
	return strconv.Itoa(n) + " B"
}

// numbersView is the table under the chart, in MB/s.
type numbersView struct {
	Sizes   []int
	Rows    []numbersRow
	HasBest bool // some cipher has rival implementations
	// HasUnsteady: some cell's trials ranged over unsteadySpread.
	HasUnsteady bool
}

type numbersRow struct {
	series
	Cells []numbersCell
}

type numbersCell struct {
	Text  string
	Title string // the trials' range, when there were several
	Best  bool   // fastest implementation of its cipher at this size
	// Spread is the trials' range as ± half of it relative to the figure
	// ("±3 %"), empty for one trial; Unsteady marks a range wider than
	// unsteadySpread of the figure: a cell measured while the host was busy.
	Spread   string
	Unsteady bool
}

// unsteadySpread is the range of a cell's trials, relative to the cell,
// past which the page marks the cell as measured under load.
const unsteadySpread = 0.10

func newNumbers(rows []series) *numbersView {
	nv := &numbersView{}
	for _, r := range rows {
		nv.Sizes = append(nv.Sizes, r.sizes...)
	}
	slices.Sort(nv.Sizes)
	nv.Sizes = slices.Compact(nv.Sizes)
	rate := func(r series, size int) (float64, bool) {
		if i := slices.Index(r.sizes, size); i >= 0 {
			return r.rates[i], true
		}
		return 0, false
	}
	for _, r := range rows {
		nr := numbersRow{series: r}
		for _, size := range nv.Sizes {
			v, ok := rate(r, size)
			if !ok {
				nr.Cells = append(nr.Cells, numbersCell{Text: "–"})
				continue
			}
			best, rivals := true, 0
			for _, o := range rows {
				if o.cipher == r.cipher && o.Impl != r.Impl {
					rivals++
					if ov, ok := rate(o, size); ok && ov > v {
						best = false
					}
				}
			}
			title := ""
			if i := slices.Index(r.sizes, size); i < len(r.trials) {
				title = r.trials[i]
			}
			cell := numbersCell{Text: formatMBps(v), Title: title, Best: best && rivals > 0}
			if i := slices.Index(r.sizes, size); i < len(r.lows) && i < len(r.highs) && v > 0 && r.highs[i] > r.lows[i] {
				rel := (r.highs[i] - r.lows[i]) / v
				cell.Spread = fmt.Sprintf("±%.0f %%", 100*rel/2)
				cell.Unsteady = rel > unsteadySpread
				nv.HasUnsteady = nv.HasUnsteady || cell.Unsteady
			}
			nr.Cells = append(nr.Cells, cell)
			nv.HasBest = nv.HasBest || rivals > 0
		}
		nv.Rows = append(nv.Rows, nr)
	}
	return nv
}

// formatMBps formats bytes per second in MB/s with about four significant
// digits and thousands separators.
func formatMBps(bps float64) string {
	v := bps / 1e6
	switch {
	case v >= 100:
		return groupThousands(strconv.FormatFloat(v, 'f', 0, 64))
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func groupThousands(digits string) string {
	var b strings.Builder
	for i, ch := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	return b.String()
}

// when formats t in UTC with how long ago it was.
func when(t, now time.Time) string {
	s := t.UTC().Format("2006-01-02 15:04:05 UTC")
	if ago := now.Sub(t); ago >= 2*time.Second {
		s += " (" + roundDuration(ago) + " ago)"
	}
	return s
}

// roundDuration formats d to a precision that suits its size: whole
// seconds from a minute, hundredths from a second, tenths of a
// millisecond from a millisecond, else microseconds.
func roundDuration(d time.Duration) string {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

func shortRevision(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// pageTemplate is parsed on first use rather than at init: parsing took
// 0.7 ms of every start of the cipherd binary (GODEBUG=inittrace=1), client
// commands included, which never render a page.
var pageTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("speed").Funcs(template.FuncMap{
		"pct":            func(f float64) string { return strconv.FormatFloat(f*100, 'g', 3, 64) + " %" },
		"unsteadySpread": func() float64 { return unsteadySpread },
		"dur":            roundDuration,
		"short":          shortRevision,
		"sizelbl":        sizeLabel,
		"legendEnd":      func(x float64) float64 { return x + 24 },
		"legendText":     func(x float64) float64 { return x + 30 },
	}).Parse(pageHTML))
})

const pageHTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light">
{{- if .Refresh}}
<meta http-equiv="refresh" content="2">
{{- end}}
<title>cipherd speed · {{.Host.Brand}}</title>
<link rel="icon" href="data:,">
<style>
:root { --bg: #f4f5f7; --card: #fff; --fg: #1b1f24; --muted: #5d6673; --rule: #e2e5e9; --grid: #eceef1; --chip: #eef1f5; --link: #1d4ed8; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
header, main, footer { max-width: 1120px; margin: 0 auto; padding: 0 24px; }
header { padding-top: 28px; padding-bottom: 8px; display: flex; flex-wrap: wrap; align-items: baseline; justify-content: space-between; gap: 8px 24px; }
h1 { margin: 0; font-size: 26px; letter-spacing: -0.01em; }
h1 span { color: var(--muted); font-weight: 400; }
h2 { margin: 0 0 12px; font-size: 17px; }
h3 { margin: 18px 0 8px; font-size: 14px; color: var(--muted); font-weight: 600; text-transform: uppercase; letter-spacing: 0.04em; }
.sub { margin: 2px 0 0; color: var(--muted); }
nav { color: var(--muted); }
a { color: var(--link); text-decoration: none; }
a:hover { text-decoration: underline; }
.card { background: var(--card); border: 1px solid var(--rule); border-radius: 10px; padding: 18px 20px; margin: 16px 0; }
.cols { display: grid; grid-template-columns: 1fr 1fr; gap: 0 16px; align-items: start; }
.cols > .card { margin: 0 0 16px; }
@media (max-width: 860px) { .cols { grid-template-columns: 1fr; } }
.status { display: flex; align-items: center; gap: 10px; margin-bottom: 14px; }
.badge { display: inline-block; padding: 1px 10px; border-radius: 999px; font-size: 12px; font-weight: 600; text-transform: uppercase; letter-spacing: 0.05em; background: #e5e7eb; color: #374151; }
.done .badge { background: #dcfce7; color: #166534; }
.measuring .badge { background: #fef3c7; color: #92400e; }
.failed .badge { background: #fee2e2; color: #991b1b; }
.note { color: var(--muted); font-size: 13px; margin: 8px 0 0; }
.charts { display: grid; grid-template-columns: 1fr 1fr; gap: 8px 20px; }
@media (max-width: 860px) { .charts { grid-template-columns: 1fr; } }
svg.chart { display: block; width: 100%; height: auto; font-size: 12px; }
.chart .title .unit { fill: var(--muted); font-weight: 400; }
.chart .legend text.chosen { font-weight: 700; }
.chart .grid line { stroke: var(--grid); }
.chart .axis { stroke: #9aa3ad; }
.chart text { fill: var(--muted); }
.chart .legend text { fill: var(--fg); }
.chart .legend .impl { fill: var(--muted); }
.chart .title { fill: var(--fg); font-weight: 600; }
table { border-collapse: collapse; width: 100%; font-size: 14px; }
th, td { text-align: left; padding: 5px 10px; border-bottom: 1px solid var(--rule); vertical-align: top; }
th { font-weight: 600; color: var(--muted); font-size: 13px; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
small.spread { color: #6b7280; font-weight: normal; }
small.spread.unsteady { color: #c2410c; }
td.best { font-weight: 700; }
td.name { white-space: nowrap; }
.swatch { vertical-align: middle; margin-right: 6px; }
.chips { display: flex; flex-wrap: wrap; gap: 6px; margin: 0; padding: 0; list-style: none; }
.chips li { background: var(--chip); border-radius: 6px; padding: 1px 8px; font-size: 13px; font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 18px; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
code, .mono { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 13px; }
.pass { color: #166534; font-weight: 700; }
.warn { color: #92400e; font-weight: 700; }
.tick { color: #166534; }
footer { color: var(--muted); font-size: 13px; padding-bottom: 28px; }
.glance .answer { font-size: 17px; line-height: 1.45; margin: 4px 0 8px; }
</style>
</head>
<body>
<header>
<div>
<h1>cipherd <span>speed</span></h1>
<p class="sub">{{.Host.Brand}} · {{.Host.LogicalCores}} logical cores · GOMAXPROCS {{.Host.GOMAXPROCS}} · {{.Host.GOARCH}} · cipherd {{.Build.Version}}</p>
</div>
<nav>Also as <a href="?format=json">JSON</a> · <a href="?format=text">openssl text</a> · <a href="?format=mr">openssl -mr</a></nav>
</header>
<main>
{{- with .Summary}}
<section class="card glance" id="summary">
<h2>At a glance</h2>
<p class="answer">{{$.Glance}}</p>
<p class="note">Why {{.AEAD}}: {{.Reason}}. {{if eq .Source "table"}}From the table below{{else}}From the quick profile at start-up{{end}}: each figure is the median of its trials, with the range of the trials after it.</p>
</section>
{{- end}}
<section class="card">
<div class="status {{.State}}"><span class="badge">{{.State}}</span><span>{{.Status}}</span></div>
{{- if .Charts}}
<h2>{{.ChartTitle}}</h2>
<div class="charts">
{{- range .Charts}}
{{template "chart" .}}
{{- end}}
</div>
<p class="note">{{.RunNote}} Each family has its own scale. Wide solid lines with points are the implementations the service uses; narrow dashed faded lines the others. Hover a point for its value.</p>
{{- else}}
<p class="note">Nothing has been measured yet.</p>
{{- end}}
</section>
{{- with .Numbers}}
<section class="card">
<h2>Throughput in MB/s (10⁶ bytes per second)</h2>
<table>
<thead><tr><th>cipher</th><th>implementation</th>{{range .Sizes}}<th class="num">{{sizelbl .}}</th>{{end}}</tr></thead>
<tbody>
{{- range .Rows}}
<tr{{if .Selected}} class="chosen"{{end}}><td><svg class="swatch" width="28" height="10" viewBox="0 0 28 10" aria-hidden="true"><line x1="1" y1="5" x2="27" y2="5" stroke="{{.Color}}" stroke-width="3"{{if .Dash}} stroke-dasharray="{{.Dash}}"{{end}}/></svg>{{.Name}}</td><td>{{.Impl}}{{if .Selected}} <span class="tick" title="used by the service">✓</span>{{end}}</td>{{range .Cells}}<td class="num{{if .Best}} best{{end}}"{{if .Title}} title="{{.Title}}"{{end}}>{{.Text}}{{if .Spread}}<br><small class="spread{{if .Unsteady}} unsteady{{end}}">{{.Spread}}</small>{{end}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table>
<p class="note">Under each figure, ± half the range of its trials{{if .HasUnsteady}}; in orange, a range over {{pct unsteadySpread}} of the figure: the host was busy while the cell was measured{{end}}. {{if .HasBest}}Bold: the fastest implementation of its cipher at that size. {{end}}✓: the implementation the service uses. openssl's own table is in 1000s of bytes per second: <a href="?format=text">?format=text</a>.</p>
</section>
{{- end}}
<div class="cols">
<section class="card">
<h2>Selection</h2>
<dl class="facts">
<dt>AEAD for new data</dt><dd><strong>{{.Sel.AEADName}}</strong>{{if .AEADImpl}} <span class="mono">({{.AEADImpl}})</span>{{end}}<br>{{.Sel.AEADReason}}</dd>
<dt>Candidates</dt><dd>{{range $i, $c := .Sel.Candidates}}{{if $i}}, {{end}}{{$c}}{{end}} <span class="note">(in order of preference; a later one must be {{pct .Sel.Margin}} faster)</span></dd>
</dl>
<p class="note">{{.Profile}}</p>
<h3>Implementation per cipher</h3>
<table>
<thead><tr><th>cipher</th><th>implementation</th><th>why</th></tr></thead>
<tbody>
{{- range .Sel.Implementations}}
<tr><td class="name">{{.Name}}</td><td class="mono">{{.Impl}}</td><td>{{.Reason}}</td></tr>
{{- end}}
</tbody>
</table>
</section>
<section class="card">
<h2>Self-test</h2>
<p><span class="{{if eq .KATVerdict "PASS"}}pass{{else}}warn{{end}}">{{.KATVerdict}}</span> — {{.KAT.Passed}} of {{.KAT.Results}} known-answer runs passed in {{dur .KAT.Duration}}; {{.KAT.Ciphers}} of {{.CipherN}} ciphers usable.</p>
{{- if .KAT.Failures}}
<h3>Failures (implementations disabled)</h3>
<table>
<thead><tr><th>test</th><th>implementation</th><th>error</th></tr></thead>
<tbody>
{{- range .KAT.Failures}}
<tr><td>{{.KAT}}</td><td class="mono">{{if .Impl}}{{.CipherName}}/{{.Impl}}{{else}}primitive{{end}}</td><td>{{.Error}}{{if .Injected}} (injected){{end}}</td></tr>
{{- end}}
</tbody>
</table>
{{- end}}
<h3>Usable implementations</h3>
<ul class="chips">{{range .KAT.Usable}}<li>{{.}}</li>{{end}}</ul>
</section>
</div>
<section class="card">
<h2>Host and build</h2>
<div class="cols">
<dl class="facts">
<dt>CPU</dt><dd>{{.Host.Brand}}</dd>
<dt>Vendor</dt><dd>{{.Host.Vendor}}, family {{.Host.Family}} model {{.Host.Model}} stepping {{.Host.Stepping}}</dd>
{{- if .Host.Hypervisor}}
<dt>Hypervisor</dt><dd>{{.Host.Hypervisor}}</dd>
{{- end}}
<dt>Cores</dt><dd>{{.Host.LogicalCores}} logical, GOMAXPROCS {{.Host.GOMAXPROCS}}, cgroup CPU limit {{.Quota}}</dd>
<dt>System</dt><dd>{{.Host.OS}}/{{.Host.GOARCH}}, {{.Host.GoVersion}}</dd>
</dl>
<dl class="facts">
<dt>Version</dt><dd>cipherd {{.Build.Version}}</dd>
{{- if .Build.Revision}}
<dt>Revision</dt><dd class="mono">{{short .Build.Revision}}{{if .Build.Modified}} (modified){{end}}{{if .Build.Time}} · {{.Build.Time}}{{end}}</dd>
{{- end}}
<dt>Build</dt><dd>{{.Build.Platform}}{{if .Build.GOAMD64}} · GOAMD64={{.Build.GOAMD64}}{{end}}{{if .Build.Tags}} · tags {{.Build.Tags}}{{end}}</dd>
{{- if .Build.BuildID}}
<dt>Build ID</dt><dd class="mono" title="{{.Build.BuildID}}">{{short .Build.BuildID}}…</dd>
{{- end}}
</dl>
</div>
<h3>CPU features in use</h3>
<ul class="chips">{{range .Host.Features}}<li>{{.}}</li>{{else}}<li>none</li>{{end}}</ul>
{{- if .Host.Disabled}}
<h3>Present but switched off by GODEBUG</h3>
<ul class="chips">{{range .Host.Disabled}}<li>{{.}}</li>{{end}}</ul>
{{- end}}
</section>
</main>
<footer>Generated {{.Generated}}.</footer>
</body>
</html>
{{define "chart" -}}
<svg class="chart" viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="{{.Title}}: throughput in {{.Unit}} against message size, one line per cipher and implementation">
<text class="title" x="{{.X0}}" y="16">{{.Title}} <tspan class="unit">{{.Unit}}</tspan></text>
<g class="grid">
{{- range .YTicks}}<line x1="{{$.X0}}" x2="{{$.X1}}" y1="{{.Pos}}" y2="{{.Pos}}"/>{{end}}
{{- range .XTicks}}<line x1="{{.Pos}}" x2="{{.Pos}}" y1="{{$.Y0}}" y2="{{$.Y1}}"/>{{end}}
</g>
<line class="axis" x1="{{.X0}}" x2="{{.X1}}" y1="{{.Y1}}" y2="{{.Y1}}"/>
<line class="axis" x1="{{.X0}}" x2="{{.X0}}" y1="{{.Y0}}" y2="{{.Y1}}"/>
<g text-anchor="end">
{{- range .YTicks}}<text x="{{$.X0}}" y="{{.Pos}}" dx="-6" dy="4">{{.Label}}</text>{{end}}
</g>
<g text-anchor="middle">
{{- range .XTicks}}<text x="{{.Pos}}" y="{{$.Y1}}" dy="17">{{.Label}}</text>{{end}}
<text x="{{.XMid}}" y="{{$.Y1}}" dy="34">message size (log scale)</text>
</g>
{{- range .Lines}}{{$color := .Color}}
<g class="series{{if .Selected}} chosen{{end}}" opacity="{{.Opacity}}">
<polyline points="{{.Points}}" fill="none" stroke="{{.Color}}" stroke-width="{{.Width}}" stroke-linejoin="round" stroke-linecap="round"{{if .Dash}} stroke-dasharray="{{.Dash}}"{{end}}/>
{{- range .Marks}}{{if .Bar}}<path class="err" d="M{{.X}} {{.YHi}}V{{.YLo}}M{{.X}} {{.YHi}}m-3 0h6M{{.X}} {{.YLo}}m-3 0h6" stroke="{{$color}}" stroke-width="1.2" fill="none"/>{{end}}{{end}}
{{- if .Selected}}{{range .Marks}}<circle cx="{{.X}}" cy="{{.Y}}" r="3.5" fill="{{$color}}"><title>{{.Title}}</title></circle>{{end}}
{{- else}}{{range .Marks}}<circle cx="{{.X}}" cy="{{.Y}}" r="6" fill="transparent"><title>{{.Title}}</title></circle>{{end}}{{end}}
</g>
{{- end}}
<g class="legend">
{{- range .Lines}}
<line x1="{{.LegendX}}" x2="{{.LegendX | legendEnd}}" y1="{{.LegendY}}" y2="{{.LegendY}}" stroke="{{.Color}}" stroke-width="{{if .Selected}}4{{else}}2{{end}}"{{if .Dash}} stroke-dasharray="{{.Dash}}"{{end}}/>
<text x="{{.LegendX | legendText}}" y="{{.LegendY}}" dy="4"{{if .Selected}} class="chosen"{{end}}>{{.Name}} <tspan class="impl">{{.Impl}}</tspan>{{if .Selected}} ✓{{end}}</text>
{{- end}}
</g>
</svg>
{{- end}}`
