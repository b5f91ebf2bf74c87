package speedview

import (
	"time"

	"github.com/cipherd/cipherd/internal/buildinfo"
	"github.com/cipherd/cipherd/selftest"
)

// Table states, as /speed reports them in table_state.
const (
	TableMeasuring = "measuring" // a run is in progress; table is the previous one, if any
	TableRefining  = "refining"  // table is the quick start-up table; the refined one is being measured
	TableDone      = "done"      // table holds the latest run
	TableSkipped   = "skipped"   // skip_benchmark: nothing is measured until an admin asks
	TableFailed    = "failed"    // the start-up run failed (the log says why)
)

// Table sources, as /speed reports them in table_source.
const (
	SourceStartup = "start-up"
	SourceAdmin   = "admin"
)

// Table qualities, as /speed reports them in table_quality.
const (
	QualityQuick   = "quick"   // the start-up quick table: short trials
	QualityRefined = "refined" // the start-up refined table, or an admin's run
)

// Table is one completed run (or, while refining, the rounds so far).
type Table struct {
	Result  *selftest.SpeedResult
	Took    time.Duration
	Source  string // SourceStartup or SourceAdmin
	Quality string // QualityQuick or QualityRefined
}

// Snapshot is what /speed shows: the server's speed state at one moment,
// with its self-test and selection.
type Snapshot struct {
	Host      selftest.HostReport
	Build     buildinfo.Info
	KAT       *selftest.KATReport
	Selection *selftest.Selection
	Table     *Table // the latest run; nil before the first one ends
	State     string // TableMeasuring, TableRefining, TableDone, TableSkipped or TableFailed
	// Wait, while State is TableMeasuring or TableRefining, is the seconds
	// until the run is expected to end, at least 1.
	Wait int
	// Refine, while State is TableRefining, is the refinement's progress.
	Refine RefineProgress
	// OpenSSL is the host's OpenSSL measuring the AEAD in use, when the
	// server was asked to compare (compare_openssl); nil otherwise.
	OpenSSL *OpenSSL
}

// OpenSSL is what the host's openssl measured of one cipher: its
// `openssl speed -mr -evp` figures by size.
type OpenSSL struct {
	Program selftest.Program
	Row     *selftest.SpeedRow
}

// RefineProgress is the start-up refinement's progress: the rounds done
// and due, and the time of each cell's trial.
type RefineProgress struct {
	Round, Rounds int
	TrialTime     time.Duration
}
