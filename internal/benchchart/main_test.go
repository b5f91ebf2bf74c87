package main

import (
	"encoding/xml"
	"math"
	"strconv"
	"strings"
	"testing"
)

const sample = `# title: AES-128-GCM, 16 KiB <seal>
# unit: GB/s
# note: go test -bench
16 KiB	cipherd vaes512	11.5
16 KiB	Go stdlib	5.6
16 KiB	OpenSSL 3.0	4.4
1 KiB	cipherd vaes512	7.9
1 KiB	OpenSSL 3.0	1.7
`

type svgDoc struct {
	Rects []struct {
		Class string `xml:"class,attr"`
		Width string `xml:"width,attr"`
		Fill  string `xml:"fill,attr"`
		Title string `xml:"title"`
	} `xml:"rect"`
	Texts []string `xml:"text"`
}

// The SVG is well-formed XML with one bar per row, bar lengths proportional
// to the values, one colour per series, and the title escaped.
func TestChart(t *testing.T) {
	c, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := c.writeSVG(&out); err != nil {
		t.Fatal(err)
	}
	var doc svgDoc
	if err := xml.Unmarshal([]byte(out.String()), &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, out.String())
	}
	want := map[string]float64{"11.5 GB/s": 11.5, "5.6 GB/s": 5.6, "4.4 GB/s": 4.4, "7.9 GB/s": 7.9, "1.7 GB/s": 1.7}
	colours := map[string]string{}
	var perUnit []float64
	bars := 0
	for _, r := range doc.Rects {
		if r.Class != "bar" {
			continue
		}
		bars++
		v, ok := want[r.Title]
		if !ok {
			t.Errorf("bar %q not in the input", r.Title)
			continue
		}
		w, _ := strconv.ParseFloat(r.Width, 64)
		perUnit = append(perUnit, w/v)
		colours[r.Fill] = r.Title
	}
	if bars != len(want) {
		t.Errorf("%d bars, want %d", bars, len(want))
	}
	for _, p := range perUnit {
		if math.Abs(p-perUnit[0]) > 0.02*perUnit[0] {
			t.Errorf("bar lengths not proportional to values: %v", perUnit)
		}
	}
	if len(colours) != 3 {
		t.Errorf("%d colours for 3 series", len(colours))
	}
	if !strings.Contains(out.String(), "16 KiB &lt;seal&gt;") {
		t.Error("title not escaped")
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{"", "# title: x\n", "a\tb\n", "a\tb\tx\n", "a\tb\t-1\n", "a\tb\t1\na\tb\t2\n"} {
		if _, err := parse(strings.NewReader(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}
