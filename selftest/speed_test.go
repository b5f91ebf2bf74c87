package selftest

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/kernels"
)

func TestSpeedMeasuresEveryCipherAndSize(t *testing.T) {
	sizes := []int{16, 1024}
	res, err := Speed(context.Background(), SpeedConfig{Sizes: sizes, Duration: 5 * time.Millisecond, Impl: "all"})
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, c := range kernels.Ciphers() {
		want += len(kernels.Available(c))
	}
	if len(res.Rows) != want {
		t.Fatalf("got %d rows, want one per available implementation (%d)", len(res.Rows), want)
	}
	for _, row := range res.Rows {
		if len(row.Cells) != len(sizes) {
			t.Fatalf("%s/%s: %d cells, want %d", row.Name, row.Impl, len(row.Cells), len(sizes))
		}
		for i, c := range row.Cells {
			if c.Size != sizes[i] || c.Ops <= 0 || c.Elapsed < 5*time.Millisecond || c.BytesPerSecond() <= 0 {
				t.Errorf("%s/%s: bad cell %+v", row.Name, row.Impl, c)
			}
		}
	}
}

func TestSpeedMulti(t *testing.T) {
	res, err := Speed(context.Background(), SpeedConfig{
		Ciphers: []kernels.Cipher{kernels.AES128GCM}, Sizes: []int{64}, Duration: 10 * time.Millisecond, Multi: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Multi != 3 || len(res.Rows) != 1 || res.Rows[0].Cells[0].Ops <= 0 {
		t.Fatalf("unexpected result %+v", res)
	}
}

func TestSpeedDecrypt(t *testing.T) {
	for _, c := range []kernels.Cipher{kernels.AES256GCM, kernels.ChaCha20Poly1305, kernels.AES256CBC, kernels.AES256IGE, kernels.ChaCha20} {
		res, err := Speed(context.Background(), SpeedConfig{Ciphers: []kernels.Cipher{c}, Sizes: []int{1024}, Duration: 5 * time.Millisecond, Decrypt: true})
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if !res.Decrypt || res.Rows[0].Cells[0].Ops <= 0 {
			t.Fatalf("%s: unexpected result %+v", c, res.Rows)
		}
	}
}

func TestSpeedRejects(t *testing.T) {
	ctx := context.Background()
	cases := map[string]SpeedConfig{
		"block mode, partial block": {Ciphers: []kernels.Cipher{kernels.AES128CBC}, Sizes: []int{17}, Duration: time.Millisecond},
		"zero size":                 {Ciphers: []kernels.Cipher{kernels.AES128GCM}, Sizes: []int{0}, Duration: time.Millisecond},
		"unknown implementation":    {Ciphers: []kernels.Cipher{kernels.AES128GCM}, Impl: "nonesuch", Duration: time.Millisecond},
	}
	for name, cfg := range cases {
		if _, err := Speed(ctx, cfg); err == nil {
			t.Errorf("%s: Speed succeeded", name)
		}
	}
}

func TestSpeedStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	_, err := Speed(ctx, SpeedConfig{Ciphers: []kernels.Cipher{kernels.AES128GCM}, Duration: time.Hour})
	if err != context.Canceled {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("cancel took %v", d)
	}
}

// Rounds of trials are RoundGap apart, and a cancel during a gap ends the
// run without waiting for the gap.
func TestSpeedRoundGap(t *testing.T) {
	cfg := SpeedConfig{Ciphers: []kernels.Cipher{kernels.AES128GCM}, Sizes: []int{64}, Duration: time.Millisecond, Trials: 3, RoundGap: 40 * time.Millisecond}
	var at []time.Duration
	start := time.Now()
	cfg.Round = func(_ *SpeedResult, _, _ int) { at = append(at, time.Since(start)) }
	res, err := Speed(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(at) != 3 || at[1]-at[0] < 40*time.Millisecond || at[2]-at[1] < 40*time.Millisecond {
		t.Errorf("rounds ended at %v, want 3 rounds at least 40ms apart", at)
	}
	if res.Gap != 0.04 || len(res.Rows[0].Cells[0].Trials) != 3 {
		t.Errorf("gap %g s, trials %v", res.Gap, res.Rows[0].Cells[0].Trials)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cfg.RoundGap, cfg.Round = time.Hour, func(_ *SpeedResult, _, _ int) { cancel() }
	start = time.Now()
	if _, err := Speed(ctx, cfg); err != context.Canceled {
		t.Fatalf("cancelled in the gap: err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("cancel in the gap took %v", d)
	}
}

// The benchmark loop must add no allocation to the cipher's own: a
// per-operation allocation of the harness would be measured as the cipher's.
// (The cipher's own count is 0 except for x/crypto's ChaCha20-Poly1305 built
// with pure-Go Poly1305, which moves its one-time key to the heap.)
func TestSpeedOpAllocatesNothing(t *testing.T) {
	for _, c := range kernels.Ciphers() {
		for _, im := range kernels.Available(c) {
			for _, decrypt := range []bool{false, true} {
				op, err := newSpeedOp(im, 16384, decrypt)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := testing.AllocsPerRun(100, op), cipherAllocs(t, im, 16384, decrypt); got != want {
					t.Errorf("%s (decrypt=%v): %v allocations per op, the cipher alone makes %v", im, decrypt, got, want)
				}
			}
		}
	}
}

// cipherAllocs counts the allocations of one bare call of the cipher.
func cipherAllocs(t *testing.T, im *kernels.Implementation, size int, decrypt bool) float64 {
	c := im.Cipher()
	key, iv, buf := make([]byte, c.KeySize()), make([]byte, c.IVSize()), make([]byte, size)
	switch c.Kind() {
	case kernels.KindAEAD:
		a, err := im.NewAEAD(key)
		if err != nil {
			t.Fatal(err)
		}
		ct := a.Seal(nil, iv, buf, nil)
		out := make([]byte, 0, len(ct))
		if decrypt {
			return testing.AllocsPerRun(100, func() { out, _ = a.Open(out[:0], iv, ct, nil) })
		}
		return testing.AllocsPerRun(100, func() { out = a.Seal(out[:0], iv, buf, nil) })
	case kernels.KindStream:
		s, err := im.NewStream(key, iv)
		if err != nil {
			t.Fatal(err)
		}
		return testing.AllocsPerRun(100, func() { s.XORKeyStream(buf, buf) })
	default:
		m, err := im.NewEncrypter(key, iv)
		if err != nil {
			t.Fatal(err)
		}
		return testing.AllocsPerRun(100, func() { m.CryptBlocks(buf, buf) })
	}
}

var (
	tableHeaderRE = regexp.MustCompile(`^type {8}(?: *\d+ bytes)+$`)
	tableRowRE    = regexp.MustCompile(`^(\S+) *((?: +\d+\.\d\dk?)+)$`)
)

// parseTable reads an `openssl speed` table as scripts that consume openssl's
// output do: the header's sizes, then a name and a number per size per row.
func parseTable(t *testing.T, out string) (sizes []int, rows map[string][]float64) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	i := 0
	for i < len(lines) && lines[i] != "The 'numbers' are in 1000s of bytes per second processed." {
		i++
	}
	if i+1 >= len(lines) || !tableHeaderRE.MatchString(lines[i+1]) {
		t.Fatalf("no openssl table header in:\n%s", out)
	}
	for _, f := range regexp.MustCompile(`(\d+) bytes`).FindAllStringSubmatch(lines[i+1], -1) {
		n, _ := strconv.Atoi(f[1])
		sizes = append(sizes, n)
	}
	rows = make(map[string][]float64)
	for _, line := range lines[i+2:] {
		m := tableRowRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("row does not parse: %q", line)
		}
		for _, v := range strings.Fields(m[2]) {
			x, _ := strconv.ParseFloat(strings.TrimSuffix(v, "k"), 64)
			if strings.HasSuffix(v, "k") {
				x *= 1000
			}
			rows[m[1]] = append(rows[m[1]], x)
		}
		if len(rows[m[1]]) != len(sizes) {
			t.Fatalf("row %q has %d numbers for %d sizes", line, len(rows[m[1]]), len(sizes))
		}
	}
	return sizes, rows
}

func TestWriteTableLikeOpenSSL(t *testing.T) {
	res, err := Speed(context.Background(), SpeedConfig{
		Ciphers: []kernels.Cipher{kernels.AES128GCM, kernels.ChaCha20Poly1305}, Duration: 2 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := res.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	sizes, rows := parseTable(t, buf.String())
	if !slices.Equal(sizes, DefaultSizes) {
		t.Fatalf("sizes %v, want %v", sizes, DefaultSizes)
	}
	for _, name := range []string{"AES-128-GCM", "ChaCha20-Poly1305"} {
		for i, v := range rows[name] {
			want := res.find(name).Cells[i].BytesPerSecond()
			if v < want*0.999-10 || v > want*1.001+10 {
				t.Errorf("%s at %d bytes: table says %.2f, result %.2f", name, sizes[i], v, want)
			}
		}
	}
	// The exact openssl layout: a 13-wide name column, then 12-wide numbers.
	want := "AES-128-GCM  " + formatRate(res.Rows[0].Cells[0].BytesPerSecond())
	if !strings.Contains(buf.String(), "\n"+want) {
		t.Errorf("table lacks the line starting %q:\n%s", want, buf.String())
	}
	if !strings.Contains(buf.String(), "\ntype             16 bytes     64 bytes    256 bytes   1024 bytes   8192 bytes  16384 bytes\n") {
		t.Errorf("header differs from openssl's:\n%s", buf.String())
	}
}

func TestFormatRate(t *testing.T) {
	for in, want := range map[float64]string{
		46971780:   "    46971.78k",
		9999:       "     9999.00 ",
		10000.5:    "       10.00k",
		1.2345e10:  " 12345000.00k",
		0:          "        0.00 ",
		5.6789e+07: "    56789.00k",
	} {
		if got := formatRate(in); got != want {
			t.Errorf("formatRate(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestWriteMR(t *testing.T) {
	res := &SpeedResult{Sizes: []int{16, 64}, Rows: []SpeedRow{
		{Name: "AES-128-GCM", Impl: "stdlib", Cells: []SpeedCell{{Size: 16, Ops: 3, Elapsed: time.Second}, {Size: 64, Ops: 1000, Elapsed: 2 * time.Second}}},
	}}
	var buf bytes.Buffer
	if err := res.WriteMR(&buf); err != nil {
		t.Fatal(err)
	}
	want := "+H:16:64\n+F:25:AES-128-GCM:48.00:32000.00\n"
	if buf.String() != want {
		t.Fatalf("got %q, want %q", buf.String(), want)
	}
	// Our own parser of openssl's -mr output reads it back.
	sizes, rates, err := parseOpenSSLMR(buf.String())
	if err != nil || !slices.Equal(sizes, []int{16, 64}) || rates[0] != 48 || rates[1] != 32000 {
		t.Fatalf("parse back: %v %v %v", sizes, rates, err)
	}
}

func TestSpeedJSON(t *testing.T) {
	res, err := Speed(context.Background(), SpeedConfig{Ciphers: []kernels.Cipher{kernels.ChaCha20}, Sizes: []int{64}, Duration: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Host struct {
			Vendor     string   `json:"vendor"`
			GOMAXPROCS int      `json:"gomaxprocs"`
			Features   []string `json:"features"`
		} `json:"host"`
		Rows []struct {
			Cipher string `json:"cipher"`
			Impl   string `json:"impl"`
			Cells  []struct {
				Size int   `json:"size"`
				Ops  int64 `json:"ops"`
			} `json:"cells"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Host.GOMAXPROCS <= 0 || len(back.Rows) != 1 || back.Rows[0].Cipher != "ChaCha20" ||
		back.Rows[0].Impl != kernels.Available(kernels.ChaCha20)[0].Name() || back.Rows[0].Cells[0].Size != 64 || back.Rows[0].Cells[0].Ops <= 0 {
		t.Fatalf("unexpected JSON %s", b)
	}
}
