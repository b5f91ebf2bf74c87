package speedview

import (
	"fmt"
	"slices"
	"time"

	"github.com/cipherd/cipherd/internal/buildinfo"
	"github.com/cipherd/cipherd/kernels"
	"github.com/cipherd/cipherd/selftest"
)

// Report is the JSON body of GET /speed and of the server's answer to POST
// /speed/run. Its field names and their order are the API: clients parse
// them.
type Report struct {
	// Summary comes first: what the host uses for new data, and how fast
	// (null when no AEAD is usable).
	Summary   *summary            `json:"summary"`
	Host      selftest.HostReport `json:"host"`
	Build     buildinfo.Info      `json:"build"`
	KAT       katSummary          `json:"kat"`
	Selection *selftest.Selection `json:"selection"`
	// Table is the latest full run, or null before the first one ends.
	Table         *selftest.SpeedResult `json:"table"`
	TableState    string                `json:"table_state"`
	TableMeasured *time.Time            `json:"table_measured"`
	TableTook     time.Duration         `json:"table_took_ns,omitempty"`
	TableSource   string                `json:"table_source,omitempty"`
	// TableQuality is "quick" (the start-up table of short trials) or
	// "refined"; TableMethod says how each cell was measured, and
	// TableSpread is the median over cells of their trials' range relative
	// to the cell.
	TableQuality string  `json:"table_quality,omitempty"`
	TableMethod  string  `json:"table_method,omitempty"`
	TableSpread  float64 `json:"table_median_spread,omitempty"`
	// Refining counts the rounds of the refined table measured and due
	// while table_state is "refining".
	Refining *refineState `json:"refining,omitempty"`
}

// refineState is the refinement's progress in the report: rounds done and
// due, the time of each trial and the seconds left.
type refineState struct {
	Round      int     `json:"round"`
	Rounds     int     `json:"rounds"`
	PerTrial   float64 `json:"seconds_per_trial"`
	SecondsDue int     `json:"seconds_left"`
}

// katSummary is the known-answer report in brief.
type katSummary struct {
	Results  int                  `json:"results"`
	Passed   int                  `json:"passed"`
	Failures []selftest.KATResult `json:"failures"`
	Usable   []string             `json:"usable"` // implementations that passed, "aes-128-gcm/stdlib"
	Ciphers  int                  `json:"ciphers_usable"`
	Duration time.Duration        `json:"duration_ns"`
}

// summarizeKAT returns the brief of r.
func summarizeKAT(r *selftest.KATReport) katSummary {
	k := katSummary{Results: len(r.Results), Failures: r.Failures(), Usable: []string{}, Duration: r.Duration}
	if k.Failures == nil {
		k.Failures = []selftest.KATResult{}
	}
	k.Passed = k.Results - len(k.Failures)
	for _, c := range kernels.Ciphers() {
		usable := r.Usable(c)
		for _, im := range usable {
			k.Usable = append(k.Usable, im.String())
		}
		if len(usable) > 0 {
			k.Ciphers++
		}
	}
	return k
}

// NewReport returns the JSON report of snap.
func NewReport(snap *Snapshot) *Report {
	rep := &Report{
		Host:       snap.Host,
		Build:      snap.Build,
		KAT:        summarizeKAT(snap.KAT),
		Selection:  snap.Selection,
		TableState: snap.State,
	}
	var res *selftest.SpeedResult
	if t := snap.Table; t != nil {
		res = t.Result
		rep.Table, rep.TableTook, rep.TableSource, rep.TableQuality = t.Result, t.Took, t.Source, t.Quality
		rep.TableMethod, rep.TableSpread = tableMethod(t.Result), medianSpread(t.Result)
		measured := t.Result.Started
		rep.TableMeasured = &measured
	}
	rep.Summary = summarize(snap.Selection, res, snap.OpenSSL)
	if snap.State == TableRefining {
		rep.Refining = &refineState{Round: snap.Refine.Round, Rounds: snap.Refine.Rounds, PerTrial: snap.Refine.TrialTime.Seconds(), SecondsDue: snap.Wait}
	}
	return rep
}

// tableMethod says in words how a table was measured, for the JSON and the
// page: "median of 5 interleaved trials of 100ms per cell in rounds 10s
// apart, one worker, encryption".
func tableMethod(res *selftest.SpeedResult) string {
	per := time.Duration(res.Seconds * float64(time.Second)).Round(100 * time.Microsecond)
	s := fmt.Sprintf("%s per cell", per)
	if res.Trials > 1 {
		s = fmt.Sprintf("median of %d interleaved trials of %s per cell", res.Trials, per)
		if res.Gap > 0 {
			s += fmt.Sprintf(" in rounds %s apart", time.Duration(res.Gap*float64(time.Second)).Round(time.Millisecond))
		}
	}
	if res.Multi > 1 {
		s += fmt.Sprintf(", %d workers", res.Multi)
	} else {
		s += ", one worker"
	}
	if res.Decrypt {
		return s + ", decryption"
	}
	return s + ", encryption; a fresh Seal per message for AEADs, as openssl speed -evp does"
}

// medianSpread returns the median over the table's cells of their trials'
// range relative to the cell (0 for single trials).
func medianSpread(res *selftest.SpeedResult) float64 {
	var xs []float64
	for _, row := range res.Rows {
		for _, c := range row.Cells {
			xs = append(xs, c.Spread())
		}
	}
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}
