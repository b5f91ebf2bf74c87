package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/zap"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/internal/buildinfo"
	"github.com/cipherd/cipherd/kernels"
	"github.com/cipherd/cipherd/selftest"
)

// The full table measured after start-up: every implementation that passed
// the self-test, every cipher, openssl's sizes, in about startupBudget of
// wall time (each cell between minCellTime and maxCellTime).
const (
	startupBudget = 1500 * time.Millisecond
	minCellTime   = 2 * time.Millisecond
	maxCellTime   = 20 * time.Millisecond
)

// Limits of POST /speed/run.
const (
	runMaxSeconds   = 3.0              // per cell
	runMaxTotal     = 60 * time.Second // cells × time per cell
	runMaxSizes     = 16
	runMaxSize      = 1 << 20
	runMaxBody      = 64 << 10
	runCellOverhead = time.Millisecond // set-up per cell, for the estimate
)

// Table states, as /speed reports them in table_state.
const (
	tableMeasuring = "measuring" // a run is in progress; table is the previous one, if any
	tableDone      = "done"      // table holds the latest run
	tableSkipped   = "skipped"   // skip_benchmark: nothing is measured until an admin asks
	tableFailed    = "failed"    // the start-up run failed (the log says why)
)

// Table sources, as /speed reports them in table_source.
const (
	sourceStartup = "start-up"
	sourceAdmin   = "admin"
)

// speedTable is one completed run.
type speedTable struct {
	result *selftest.SpeedResult
	took   time.Duration
	source string
}

// speedRun describes the run in progress.
type speedRun struct {
	started time.Time
	expect  time.Duration
}

// speedState holds the latest full benchmark table and runs new ones, one at
// a time.
type speedState struct {
	s     *Server
	host  selftest.HostReport
	build buildinfo.Info

	table   atomic.Pointer[speedTable]
	running atomic.Pointer[speedRun] // nil when no run is in progress
	pending atomic.Bool              // the start-up run has not finished
	failed  atomic.Bool              // the start-up run failed

	mu sync.Mutex // held by the run in progress
}

func newSpeedState(s *Server) *speedState {
	sp := &speedState{s: s, host: selftest.Host(), build: buildinfo.Get()}
	sp.pending.Store(!s.cfg.SkipBenchmark)
	return sp
}

// runInitial measures the full table once after start-up, unless the
// benchmark is skipped or an admin run already produced one. It returns when
// the table is stored, or early when ctx ends.
func (sp *speedState) runInitial(ctx context.Context) {
	if sp.s.cfg.SkipBenchmark {
		return
	}
	defer sp.pending.Store(false)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.table.Load() != nil || ctx.Err() != nil {
		return
	}
	cfg := selftest.SpeedConfig{Impl: "all", KAT: sp.s.kat, Sizes: selftest.DefaultSizes}
	cfg.Duration = autoCellTime(sp.cells(nil, cfg.Sizes))
	if err := sp.run(ctx, cfg, sourceStartup); err != nil && ctx.Err() == nil {
		sp.failed.Store(true)
		sp.s.log.Error("speed table not measured", zap.Error(err))
	}
}

// autoCellTime spreads startupBudget over cells.
func autoCellTime(cells int) time.Duration {
	if cells <= 0 {
		return maxCellTime
	}
	return min(max(startupBudget/time.Duration(cells), minCellTime), maxCellTime)
}

// cells counts the cells a run over ciphers (nil: all) and sizes measures.
func (sp *speedState) cells(ciphers []kernels.Cipher, sizes []int) int {
	if ciphers == nil {
		ciphers = kernels.Ciphers()
	}
	n := 0
	for _, c := range ciphers {
		n += len(sp.s.kat.Usable(c)) * len(sizes)
	}
	return n
}

// run measures cfg and stores the table. The caller holds sp.mu.
func (sp *speedState) run(ctx context.Context, cfg selftest.SpeedConfig, source string) error {
	cells := sp.cells(cfg.Ciphers, cfg.Sizes)
	start := time.Now()
	sp.running.Store(&speedRun{started: start, expect: time.Duration(cells) * (cfg.Duration + runCellOverhead)})
	defer sp.running.Store(nil)
	res, err := selftest.Speed(ctx, cfg)
	if err != nil {
		return err
	}
	t := &speedTable{result: res, took: time.Since(start), source: source}
	sp.table.Store(t)
	sp.failed.Store(false)
	sp.s.log.Info("speed table measured",
		zap.String("source", source), zap.Int("rows", len(res.Rows)), zap.Int("cells", cells),
		zap.Duration("per_cell", cfg.Duration), zap.Duration("took", t.took))
	return nil
}

// state returns the table state and, while measuring, the seconds until the
// run is expected to end (at least 1).
func (sp *speedState) state() (string, int) {
	if r := sp.running.Load(); r != nil || sp.pending.Load() {
		wait := 1
		if r != nil {
			left := r.expect - time.Since(r.started)
			wait = max(1, int(math.Ceil(left.Seconds())))
		}
		return tableMeasuring, wait
	}
	switch {
	case sp.table.Load() != nil:
		return tableDone, 0
	case sp.failed.Load():
		return tableFailed, 0
	}
	return tableSkipped, 0
}

// speedReport is the JSON body of GET /speed and POST /speed/run.
type speedReport struct {
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

func (sp *speedState) report() *speedReport {
	state, _ := sp.state()
	rep := &speedReport{
		Host:       sp.host,
		Build:      sp.build,
		KAT:        summarizeKAT(sp.s.kat),
		Selection:  sp.s.sel,
		TableState: state,
	}
	if t := sp.table.Load(); t != nil {
		rep.Table, rep.TableTook, rep.TableSource = t.result, t.took, t.source
		measured := t.result.Started
		rep.TableMeasured = &measured
	}
	return rep
}

// Response formats of GET /speed.
const (
	formatJSON = "json"
	formatText = "text"
	formatMR   = "mr"
	formatHTML = "html"
)

// speedFormat picks the response format: ?format= wins; otherwise a client
// that prefers HTML (a browser) gets the page and everyone else JSON.
func speedFormat(c *fiber.Ctx) (string, error) {
	switch f := c.Query("format"); f {
	case formatJSON, formatText, formatMR, formatHTML:
		return f, nil
	case "":
	default:
		return "", apiError(api.CodeBadRequest, "format must be json, text, mr or html")
	}
	if c.Accepts(fiber.MIMEApplicationJSON, fiber.MIMETextHTML) == fiber.MIMETextHTML {
		return formatHTML, nil
	}
	return formatJSON, nil
}

// handleSpeed serves the benchmark: JSON, openssl's text table, its -mr
// lines, or an HTML page with a chart.
func (s *Server) handleSpeed(c *fiber.Ctx) error {
	c.Vary(fiber.HeaderAccept)
	format, err := speedFormat(c)
	if err != nil {
		return err
	}
	sp := s.speed
	switch format {
	case formatHTML:
		return sp.writePage(c)
	case formatText, formatMR:
		t := sp.table.Load()
		if t == nil {
			return sp.notReady(c)
		}
		c.Set(fiber.HeaderContentType, fiber.MIMETextPlainCharsetUTF8)
		if format == formatText {
			return t.result.WriteTable(c)
		}
		return t.result.WriteMR(c)
	}
	return c.JSON(sp.report())
}

// notReady answers a request for the table before there is one.
func (sp *speedState) notReady(c *fiber.Ctx) error {
	state, wait := sp.state()
	switch state {
	case tableMeasuring:
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(wait))
		return apiError(api.CodeNotReady, "the speed table is being measured; retry shortly")
	case tableFailed:
		return apiError(api.CodeNotReady, "the speed table could not be measured; an admin can retry with POST /speed/run")
	}
	return apiError(api.CodeNotReady, "the benchmark is skipped by configuration; an admin can run it with POST /speed/run")
}

// speedRunRequest is the optional body of POST /speed/run.
type speedRunRequest struct {
	// Seconds per cell, at most 3. Zero means automatic: the whole run takes
	// about as long as the one after start-up.
	Seconds float64 `json:"seconds,omitempty"`
	// Ciphers to measure, by EVP name ("aes-128-gcm"). Empty means all.
	Ciphers []string `json:"ciphers,omitempty"`
	// Sizes in bytes. Empty means openssl's (16 … 16384).
	Sizes []int `json:"sizes,omitempty"`
}

// speedConfig validates the request and returns what to measure.
func (sp *speedState) speedConfig(req *speedRunRequest) (selftest.SpeedConfig, error) {
	bad := func(format string, a ...any) error {
		return apiError(api.CodeBadRequest, fmt.Sprintf(format, a...))
	}
	cfg := selftest.SpeedConfig{Impl: "all", KAT: sp.s.kat, Sizes: selftest.DefaultSizes}
	for _, name := range req.Ciphers {
		c, err := kernels.ParseCipher(name)
		if err != nil {
			return cfg, bad("unknown cipher %q", name)
		}
		if len(sp.s.kat.Usable(c)) == 0 {
			return cfg, apiError(api.CodeUnsupported, fmt.Sprintf("no implementation of %s passed the self-test on this host", c))
		}
		if !slices.Contains(cfg.Ciphers, c) {
			cfg.Ciphers = append(cfg.Ciphers, c)
		}
	}
	if len(req.Sizes) > 0 {
		if len(req.Sizes) > runMaxSizes {
			return cfg, bad("at most %d sizes", runMaxSizes)
		}
		sizes := slices.Clone(req.Sizes)
		slices.Sort(sizes)
		cfg.Sizes = slices.Compact(sizes)
	}
	ciphers := cfg.Ciphers
	if ciphers == nil {
		ciphers = sp.s.kat.Ciphers()
	}
	for _, n := range cfg.Sizes {
		if n < 1 || n > runMaxSize {
			return cfg, bad("sizes must be between 1 and %d bytes", runMaxSize)
		}
		for _, c := range ciphers {
			if n%c.BlockSize() != 0 {
				return cfg, bad("%s works on %d-byte blocks; size %d is not a multiple (leave it out of ciphers, or pick other sizes)", c, c.BlockSize(), n)
			}
		}
	}
	cells := sp.cells(cfg.Ciphers, cfg.Sizes)
	switch s := req.Seconds; {
	case s == 0:
		cfg.Duration = autoCellTime(cells)
	case s < 0.001 || s > runMaxSeconds:
		return cfg, bad("seconds per cell must be between 0.001 and %g", runMaxSeconds)
	default:
		cfg.Duration = time.Duration(s * float64(time.Second))
	}
	if total := time.Duration(cells) * cfg.Duration; total > runMaxTotal {
		return cfg, bad("the run would measure %d cells for %s each, %s in all; the limit is %s", cells, cfg.Duration, total.Round(time.Second), runMaxTotal)
	}
	return cfg, nil
}

// handleSpeedRun re-measures the table (admin) and answers with the new
// report. One run at a time: another caller gets 429 with Retry-After.
func (s *Server) handleSpeedRun(c *fiber.Ctx) error {
	var req speedRunRequest
	if err := s.readJSON(c, &req, true); err != nil {
		return err
	}
	sp := s.speed
	cfg, err := sp.speedConfig(&req)
	if err != nil {
		return err
	}
	if !sp.mu.TryLock() {
		_, wait := sp.state()
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(max(wait, 1)))
		return apiError(api.CodeBusy, "a speed run is already in progress; retry when it ends")
	}
	defer sp.mu.Unlock()
	// The run ends at its route's deadline, or when the server shuts down
	// (fasthttp's request context ends then).
	ctx, cancel := context.WithCancel(c.UserContext())
	defer cancel()
	defer context.AfterFunc(c.Context(), cancel)()
	s.log.Info("speed run requested", zap.String("request_id", requestID(c)), zap.String("caller", callerName(c)))
	if err := sp.run(ctx, cfg, sourceAdmin); err != nil {
		if errors.Is(err, context.Canceled) {
			return apiError(api.CodeNotReady, "the server is shutting down")
		}
		return err
	}
	return c.JSON(sp.report())
}
