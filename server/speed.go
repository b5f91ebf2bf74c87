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
	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/buildinfo"
	"github.com/cipherd/cipherd/kernels"
	"github.com/cipherd/cipherd/selftest"
	"github.com/cipherd/cipherd/server/speedview"
)

// The full table after start-up: every implementation that passed the
// self-test, every cipher, openssl's sizes. It is measured twice. First a
// quick table, quickTrials interleaved trials per cell in about quickBudget
// of wall time (each trial between minCellTime and maxCellTime), so that
// /speed has figures within seconds; then, in the background, the refined
// table that replaces it: refineTrials interleaved trials of refineTrialTime
// per cell in rounds refineRoundGap apart, the median of which agrees with
// `cipherd speed -seconds 1` for the same implementation and size
// (docs/BENCHMARKS.md, "/speed against cipherd speed", measures it).
// Interleaving spreads a busy moment of the machine over many cells, one
// trial each, where the median ignores it; the gaps spread each cell's
// trials over more than a minute, longer than the busy spells of a shared
// host, and keep the refinement to about two thirds of one core (144 cells
// of 100 ms trials, 72 s of measuring in 112 s, on the project's machine).
const (
	quickBudget  = 1500 * time.Millisecond
	quickTrials  = 3
	minCellTime  = 2 * time.Millisecond
	maxCellTime  = 20 * time.Millisecond
	refineTrials = 5
)

// refineTrialTime and refineRoundGap time the refined table; variables so
// that the package's tests can make the refinement short.
var (
	refineTrialTime = 100 * time.Millisecond
	refineRoundGap  = 10 * time.Second
)

// Limits of POST /speed/run.
const (
	runMaxSeconds   = 3.0              // per cell
	runMaxTotal     = 60 * time.Second // cells × time per cell
	runMaxSizes     = 16
	runMaxTrials    = 9
	runMaxSize      = 1 << 20
	runMaxBody      = 64 << 10
	runCellOverhead = time.Millisecond // set-up per cell, for the estimate
)

// speedRun describes the run in progress.
type speedRun struct {
	started time.Time
	expect  time.Duration
	refine  bool // the start-up refinement, with a quick table published
	round   atomic.Int32
	rounds  int
}

// speedState holds the latest full benchmark table and runs new ones, one at
// a time.
type speedState struct {
	s     *Server
	host  selftest.HostReport
	build buildinfo.Info

	table   atomic.Pointer[speedview.Table]
	running atomic.Pointer[speedRun] // nil when no run is in progress
	pending atomic.Bool              // the start-up run has not finished
	failed  atomic.Bool              // the start-up run failed

	turn chan struct{} // holds a token while a run is in progress
	// openssl is the host's OpenSSL measuring the AEAD in use
	// (compare_openssl), once measured.
	openssl atomic.Pointer[speedview.OpenSSL]

	// changed holds a token when a table was stored since the fleet
	// report was last published.
	changed chan struct{}

	// An operator's run takes the place of the start-up refinement, which
	// only improves a table already published: yield marks that one waits,
	// and stopRefine ends the refinement in progress. Both under yieldMu, so
	// that a refinement about to start sees the mark or is stopped.
	yieldMu    sync.Mutex
	yield      bool
	stopRefine context.CancelFunc
}

func newSpeedState(s *Server) *speedState {
	sp := &speedState{s: s, host: selftest.Host(), build: buildinfo.Get(), turn: make(chan struct{}, 1), changed: make(chan struct{}, 1)}
	sp.pending.Store(!s.cfg.SkipBenchmark)
	return sp
}

// runInitial measures the full table after start-up, quick then refined,
// unless the benchmark is skipped or an admin run already produced one. It
// returns when the refined table is stored, or early when ctx ends.
func (sp *speedState) runInitial(ctx context.Context) {
	if sp.s.cfg.SkipBenchmark {
		return
	}
	sp.turn <- struct{}{}
	defer func() {
		// Not pending before the turn is free: the next run's report
		// must not show the start-up run as still due.
		sp.pending.Store(false)
		sp.endTurn()
	}()
	if sp.table.Load() != nil || ctx.Err() != nil {
		return
	}
	quick := selftest.SpeedConfig{Impl: "all", KAT: sp.s.kat, Sizes: selftest.DefaultSizes, Trials: quickTrials}
	quick.Duration = autoCellTime(sp.cells(nil, quick.Sizes) * quickTrials)
	if err := sp.run(ctx, quick, speedview.SourceStartup, speedview.QualityQuick); err != nil {
		if ctx.Err() == nil {
			sp.failed.Store(true)
			sp.s.log.Error("speed table not measured", zap.Error(err))
		}
		return
	}
	if sp.s.cfg.CompareOpenSSL != "" {
		sp.measureOpenSSL(ctx)
	}
	refined := quick
	refined.Trials, refined.Duration, refined.RoundGap = refineTrials, refineTrialTime, refineRoundGap
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	sp.yieldMu.Lock()
	yield := sp.yield
	sp.stopRefine = stop
	sp.yieldMu.Unlock()
	if yield {
		return // an operator's run waits, and replaces the quick table
	}
	err := sp.run(rctx, refined, speedview.SourceStartup, speedview.QualityRefined)
	sp.yieldMu.Lock()
	sp.stopRefine = nil
	sp.yieldMu.Unlock()
	switch {
	case err == nil, ctx.Err() != nil:
	case rctx.Err() != nil:
		sp.s.log.Info("refined speed table left for an operator's run; the quick table stays until it ends")
	default:
		// The quick table stays.
		sp.s.log.Error("refined speed table not measured", zap.Error(err))
	}
}

// measureOpenSSL has the configured openssl measure the AEAD in use at the
// summary's sizes, one second each, for /speed's comparison. A failure is
// logged: the comparison is an aid, and /speed goes on without it.
func (sp *speedState) measureOpenSSL(ctx context.Context) {
	log := sp.s.log.With(zap.String("openssl", sp.s.cfg.CompareOpenSSL))
	aead := sp.s.sel.AEAD
	if sp.s.sel.Implementation(aead) == nil {
		return
	}
	prog, err := selftest.FindOpenSSL(ctx, sp.s.cfg.CompareOpenSSL)
	if err != nil {
		log.Warn("openssl not run for /speed's comparison", zap.Error(err))
		return
	}
	row, err := selftest.OpenSSLSpeed(ctx, prog.Path, aead, speedview.SummarySizes(), time.Second, 1, false)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("openssl could not measure the AEAD in use for /speed's comparison", zap.String("aead", aead.String()), zap.Error(err))
		}
		return
	}
	sp.openssl.Store(&speedview.OpenSSL{Program: prog, Row: row})
	log.Info("openssl measured for /speed's comparison", zap.String("version", prog.Version), zap.String("aead", aead.String()))
}

// takeTurn waits for the start-up run to end, stopping its refinement, and
// reports whether the caller has the turn to run (then it calls endTurn):
// false, at once, when an operator's run is in progress, or when ctx ends
// first. The quick table takes a few seconds at most, and a stopped
// refinement ends within one trial.
func (sp *speedState) takeTurn(ctx context.Context) bool {
	select {
	case sp.turn <- struct{}{}:
		return true
	default:
	}
	if !sp.pending.Load() {
		return false // another operator's run
	}
	sp.yieldMu.Lock()
	sp.yield = true
	if sp.stopRefine != nil {
		sp.stopRefine()
	}
	sp.yieldMu.Unlock()
	select {
	case sp.turn <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// endTurn ends the run that took the turn.
func (sp *speedState) endTurn() { <-sp.turn }

// autoCellTime spreads quickBudget over trials.
func autoCellTime(trials int) time.Duration {
	if trials <= 0 {
		return maxCellTime
	}
	return min(max(quickBudget/time.Duration(trials), minCellTime), maxCellTime)
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

// run measures cfg and stores the table. The caller has the turn. A refined
// start-up run keeps the quick table published until it ends.
func (sp *speedState) run(ctx context.Context, cfg selftest.SpeedConfig, source, quality string) error {
	cells := sp.cells(cfg.Ciphers, cfg.Sizes)
	trials := max(cfg.Trials, 1)
	start := time.Now()
	r := &speedRun{started: start, expect: time.Duration(cells*trials)*(cfg.Duration+runCellOverhead) + time.Duration(trials-1)*cfg.RoundGap,
		refine: quality == speedview.QualityRefined && source == speedview.SourceStartup, rounds: trials}
	cfg.Round = func(_ *selftest.SpeedResult, round, _ int) { r.round.Store(int32(round)) }
	sp.running.Store(r)
	defer sp.running.Store(nil)
	res, err := selftest.Speed(ctx, cfg)
	if err != nil {
		return err
	}
	t := &speedview.Table{Result: res, Took: time.Since(start), Source: source, Quality: quality}
	sp.table.Store(t)
	select { // the fleet's report follows the table
	case sp.changed <- struct{}{}:
	default:
	}
	sp.failed.Store(false)
	sp.s.log.Info("speed table measured",
		zap.String("source", source), zap.String("quality", quality), zap.Int("rows", len(res.Rows)),
		zap.Int("cells", cells), zap.Int("trials", trials), zap.Duration("per_trial", cfg.Duration), zap.Duration("took", t.Took))
	return nil
}

// state returns the table state and, while measuring, the seconds until the
// run is expected to end (at least 1).
func (sp *speedState) state() (string, int) {
	r := sp.running.Load()
	if r != nil || sp.pending.Load() {
		wait := 1
		if r != nil {
			left := r.expect - time.Since(r.started)
			wait = max(1, int(math.Ceil(left.Seconds())))
		}
		if r != nil && r.refine && sp.table.Load() != nil {
			return speedview.TableRefining, wait
		}
		return speedview.TableMeasuring, wait
	}
	switch {
	case sp.table.Load() != nil:
		return speedview.TableDone, 0
	case sp.failed.Load():
		return speedview.TableFailed, 0
	}
	return speedview.TableSkipped, 0
}

// refineProgress returns the rounds of the refinement done and due, or
// zeros when none runs.
func (sp *speedState) refineProgress() (int, int) {
	if r := sp.running.Load(); r != nil && r.refine {
		return int(r.round.Load()), r.rounds
	}
	return 0, 0
}

// snapshot returns what /speed shows now.
func (sp *speedState) snapshot() *speedview.Snapshot {
	state, wait := sp.state()
	snap := &speedview.Snapshot{
		Host:      sp.host,
		Build:     sp.build,
		KAT:       sp.s.kat,
		Selection: sp.s.sel,
		Table:     sp.table.Load(),
		State:     state,
		Wait:      wait,
		OpenSSL:   sp.openssl.Load(),
	}
	if state == speedview.TableRefining {
		round, rounds := sp.refineProgress()
		snap.Refine = speedview.RefineProgress{Round: round, Rounds: rounds, TrialTime: refineTrialTime}
	}
	return snap
}

// handleSpeed serves the benchmark in the format speedview.Negotiate picks:
// the JSON report or the HTML page with its charts, which speedview renders
// from a snapshot, or the table's openssl text table or -mr lines.
func (s *Server) handleSpeed(c *fiber.Ctx, q *call) error {
	format, err := speedview.Negotiate(c)
	if err != nil {
		return apiError(api.CodeBadRequest, err.Error())
	}
	sp := s.speed
	switch format {
	case speedview.FormatHTML:
		return speedview.ServePage(c, sp.snapshot(), time.Now())
	case speedview.FormatText, speedview.FormatMR:
		t := sp.table.Load()
		if t == nil {
			return sp.notReady(c)
		}
		c.Set(fiber.HeaderContentType, fiber.MIMETextPlainCharsetUTF8)
		if format == speedview.FormatText {
			return t.Result.WriteTable(c)
		}
		return t.Result.WriteMR(c)
	}
	return c.JSON(speedview.NewReport(sp.snapshot()))
}

// notReady answers a request for the table before there is one.
func (sp *speedState) notReady(c *fiber.Ctx) error {
	state, wait := sp.state()
	switch state {
	case speedview.TableMeasuring:
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(wait))
		return apiError(api.CodeNotReady, "the speed table is being measured; retry shortly")
	case speedview.TableFailed:
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
	// Trials per cell, at most 9; the cell is the median trial. Zero means 3.
	Trials int `json:"trials,omitempty"`
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
	switch {
	case req.Trials == 0:
		cfg.Trials = 3
	case req.Trials < 1 || req.Trials > runMaxTrials:
		return cfg, bad("trials must be between 1 and %d", runMaxTrials)
	default:
		cfg.Trials = req.Trials
	}
	cells := sp.cells(cfg.Ciphers, cfg.Sizes) * cfg.Trials
	switch s := req.Seconds; {
	case s == 0:
		cfg.Duration = autoCellTime(cells)
	case s < 0.001 || s > runMaxSeconds:
		return cfg, bad("seconds per cell must be between 0.001 and %g", runMaxSeconds)
	default:
		cfg.Duration = time.Duration(s * float64(time.Second))
	}
	if total := time.Duration(cells) * cfg.Duration; total > runMaxTotal {
		return cfg, bad("the run would measure %d trials for %s each, %s in all; the limit is %s", cells, cfg.Duration, total.Round(time.Second), runMaxTotal)
	}
	return cfg, nil
}

// handleSpeedRun re-measures the table (admin) and answers with the new
// report. It takes the place of the start-up refinement, waiting for the
// quick table when that is still being measured; during another operator's
// run it is 409 busy with Retry-After.
func (s *Server) handleSpeedRun(c *fiber.Ctx, q *call) error {
	var req speedRunRequest
	if err := readJSON(c, q, &req, true); err != nil {
		return err
	}
	sp := s.speed
	cfg, err := sp.speedConfig(&req)
	if err != nil {
		return err
	}
	// The run ends at its route's deadline, or when the server shuts down
	// (fasthttp's request context ends then).
	ctx, cancel := context.WithCancel(c.UserContext())
	defer cancel()
	defer context.AfterFunc(c.Context(), cancel)()
	if !sp.takeTurn(ctx) {
		switch {
		case c.Context().Err() != nil:
			return apiError(api.CodeNotReady, "the server is shutting down")
		case ctx.Err() != nil:
			return apiError(api.CodeTimeout, "the start-up benchmark did not end in time for this run")
		}
		_, wait := sp.state()
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(max(wait, 1)))
		return apiError(api.CodeBusy, "another operator's speed run is in progress; retry when it ends")
	}
	defer sp.endTurn()
	s.log.Info("speed run requested", zap.String("request_id", requestID(c)), zap.String("caller", callerName(c)))
	if err := sp.run(ctx, cfg, speedview.SourceAdmin, speedview.QualityRefined); err != nil {
		if errors.Is(err, context.Canceled) {
			return apiError(api.CodeNotReady, "the server is shutting down")
		}
		return err
	}
	return c.JSON(speedview.NewReport(sp.snapshot()))
}

// sizeClasses hands the selection's one-shot size classes to cryptosvc.
func sizeClasses(sel *selftest.Selection) func(kernels.Cipher) []cryptosvc.SizeClass {
	return func(c kernels.Cipher) []cryptosvc.SizeClass {
		var out []cryptosvc.SizeClass
		for _, sc := range sel.SizeClasses(c) {
			out = append(out, cryptosvc.SizeClass{MaxSize: sc.MaxSize, Impl: sc.Implementation()})
		}
		return out
	}
}
