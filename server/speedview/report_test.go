package speedview

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/cipherd/cipherd/internal/buildinfo"
	"github.com/cipherd/cipherd/selftest"
)

// jsonKeys returns the keys of the JSON object raw, in their order, and
// their values.
func jsonKeys(t *testing.T, raw []byte) ([]string, map[string]json.RawMessage) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %.80s", raw)
	}
	var keys []string
	vals := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		k := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
		vals[k] = v
	}
	return keys, vals
}

// TestReportJSON pins the names and the order of the report's fields, and
// of the objects this package defines in it: clients parse them.
func TestReportJSON(t *testing.T) {
	kat, sel := skippedSelection(t)
	im := sel.Implementation(sel.AEAD)
	if im == nil {
		t.Fatalf("no implementation of %s", sel.AEAD)
	}
	impls := []string{im.Name()}
	goImpl := goImplementations[sel.AEAD]
	if goImpl != "" && goImpl != im.Name() {
		impls = append(impls, goImpl)
	}
	res := &selftest.SpeedResult{Host: selftest.Host(), Started: time.Now(), Seconds: 0.002, Trials: 3, Multi: 1, Sizes: []int{1024, 16384}}
	for i, impl := range impls {
		row := selftest.SpeedRow{Cipher: sel.AEAD, Name: sel.AEAD.DisplayName(), Impl: impl}
		for _, size := range res.Sizes {
			c := selftest.SpeedCell{Size: size, Ops: int64(1000 * (i + 1)), Elapsed: 2 * time.Millisecond}
			c.Rate = c.BytesPerSecond()
			c.Trials, c.Min, c.Max = []float64{c.Rate * 0.9, c.Rate, c.Rate * 1.1}, c.Rate*0.9, c.Rate*1.1
			row.Cells = append(row.Cells, c)
		}
		res.Rows = append(res.Rows, row)
	}
	base := Snapshot{Host: selftest.Host(), Build: buildinfo.Get(), KAT: kat, Selection: sel}

	// Before the first table: the table's optional fields are absent.
	measuring := base
	measuring.State, measuring.Wait = TableMeasuring, 3
	b, err := json.Marshal(NewReport(&measuring))
	if err != nil {
		t.Fatal(err)
	}
	keys, vals := jsonKeys(t, b)
	if want := []string{"summary", "host", "build", "kat", "selection", "table", "table_state", "table_measured"}; !slices.Equal(keys, want) {
		t.Errorf("report keys before the table:\n %q\nwant\n %q", keys, want)
	}
	if string(vals["table"]) != "null" || string(vals["table_measured"]) != "null" || string(vals["table_state"]) != `"measuring"` {
		t.Errorf("before the table: table %s, table_measured %s, table_state %s", vals["table"], vals["table_measured"], vals["table_state"])
	}
	if keys, _ := jsonKeys(t, vals["kat"]); !slices.Equal(keys, []string{"results", "passed", "failures", "usable", "ciphers_usable", "duration_ns"}) {
		t.Errorf("kat keys %q", keys)
	}

	// While refining, with the quick table: every field.
	refining := base
	refining.State, refining.Wait = TableRefining, 7
	refining.Table = &Table{Result: res, Took: time.Second, Source: SourceStartup, Quality: QualityQuick}
	refining.Refine = RefineProgress{Round: 2, Rounds: 5, TrialTime: 100 * time.Millisecond}
	b, err = json.Marshal(NewReport(&refining))
	if err != nil {
		t.Fatal(err)
	}
	keys, vals = jsonKeys(t, b)
	if want := []string{"summary", "host", "build", "kat", "selection", "table", "table_state", "table_measured", "table_took_ns",
		"table_source", "table_quality", "table_method", "table_median_spread", "refining"}; !slices.Equal(keys, want) {
		t.Errorf("report keys while refining:\n %q\nwant\n %q", keys, want)
	}
	if keys, _ := jsonKeys(t, vals["refining"]); !slices.Equal(keys, []string{"round", "rounds", "seconds_per_trial", "seconds_left"}) {
		t.Errorf("refining keys %q", keys)
	}
	if string(vals["refining"]) != `{"round":2,"rounds":5,"seconds_per_trial":0.1,"seconds_left":7}` {
		t.Errorf("refining %s", vals["refining"])
	}
	sumKeys, sum := jsonKeys(t, vals["summary"])
	want := []string{"aead", "impl", "cells", "source", "reason"}
	if len(impls) > 1 {
		want = []string{"aead", "impl", "cells", "source", "go_impl", "vs_go", "reason"}
	}
	if !slices.Equal(sumKeys, want) {
		t.Errorf("summary keys %q, want %q", sumKeys, want)
	}
	var cells []json.RawMessage
	if err := json.Unmarshal(sum["cells"], &cells); err != nil || len(cells) != 2 {
		t.Fatalf("summary cells %s", sum["cells"])
	}
	if keys, _ := jsonKeys(t, cells[0]); !slices.Equal(keys, []string{"size", "bytes_per_second", "min_bytes_per_second", "max_bytes_per_second"}) {
		t.Errorf("summary cell keys %q", keys)
	}
}
