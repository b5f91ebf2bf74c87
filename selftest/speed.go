package selftest

import (
	"cmp"
	"context"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cipherd/cipherd/kernels"
)

// DefaultSizes are the message sizes `openssl speed` measures.
var DefaultSizes = []int{16, 64, 256, 1024, 8192, 16384}

// DefaultSeconds is `openssl speed`'s default time per cell.
const DefaultSeconds = 3

// SpeedConfig says what Speed measures. The zero value measures the preferred
// implementation of every cipher at DefaultSizes for DefaultSeconds per cell.
type SpeedConfig struct {
	// Ciphers to measure, in this order. Nil means kernels.Ciphers().
	Ciphers []kernels.Cipher

	// Impl selects implementations: "" measures each cipher's preferred usable
	// implementation, "all" every usable one, any other value the implementation
	// of that name (ciphers without it are skipped, and Speed fails if none has it).
	Impl string

	// Sizes in bytes. Nil means DefaultSizes. Block modes need multiples of 16.
	Sizes []int

	// Duration of each cell (one cipher, implementation and size). Zero means
	// DefaultSeconds.
	Duration time.Duration

	// Multi runs this many workers in parallel, each with its own cipher
	// instance, and reports their total throughput. Zero or one means one.
	Multi int

	// Decrypt measures Open (and decryption for block modes) instead of Seal.
	Decrypt bool

	// Trials measures every cell this many times, each for Duration, in
	// rounds over all the cells (each round starting one cell further on),
	// and keeps the median trial, so that a pause of the machine spoils one
	// trial rather than a cell. Zero or one means one trial, in order, with
	// progress lines as openssl prints them.
	Trials int

	// RoundGap, with Trials > 1, pauses this long between rounds, so that a
	// cell's trials span more time than a busy spell of a shared machine
	// (which lasts seconds here: docs/BENCHMARKS.md, "/speed against cipherd
	// speed") and the median trial is one measured outside it.
	RoundGap time.Duration

	// Round, when set and Trials > 1, receives the result as it stands
	// after each round (every cell the median of the trials so far).
	Round func(r *SpeedResult, round, of int)

	// KAT, when set, restricts measurement to implementations that passed it.
	// Nil measures every available implementation.
	KAT *KATReport

	// OpenSSL is the openssl binary CompareOpenSSL runs: a path, or a name
	// looked up in PATH. Empty means "openssl".
	OpenSSL string

	// Progress, when set, receives a line as each cell starts and ends, in
	// openssl's words ("Doing AES-128-GCM for 3s on 16 size blocks: …"), or in
	// its -mr form ("+DT:…", "+R:…") when ProgressMR is set.
	Progress   io.Writer
	ProgressMR bool
}

// SpeedCell is one measurement: Ops messages of Size bytes in Elapsed wall
// time. With several trials, it is the median trial, and Trials, Min and Max
// say how far the others were.
type SpeedCell struct {
	Size    int           `json:"size"`
	Ops     int64         `json:"ops"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// Rate is BytesPerSecond, for readers of the JSON.
	Rate float64 `json:"bytes_per_second"`
	// WorkerOps are each worker's operations (with Multi > 1), in the same
	// Elapsed: openssl -multi's per-child figures.
	WorkerOps []int64 `json:"worker_ops,omitempty"`
	// Trials are the throughput of every trial in the order measured, and
	// Min and Max their range; set when the cell has more than one trial.
	Trials []float64 `json:"trials_bytes_per_second,omitempty"`
	Min    float64   `json:"min_bytes_per_second,omitempty"`
	Max    float64   `json:"max_bytes_per_second,omitempty"`
}

// BytesPerSecond returns the cell's throughput.
func (c SpeedCell) BytesPerSecond() float64 {
	if c.Elapsed <= 0 {
		return 0
	}
	return float64(c.Ops) * float64(c.Size) / c.Elapsed.Seconds()
}

// workerBytesPerSecond returns worker i's throughput.
func (c SpeedCell) workerBytesPerSecond(i int) float64 {
	if c.Elapsed <= 0 || i >= len(c.WorkerOps) {
		return 0
	}
	return float64(c.WorkerOps[i]) * float64(c.Size) / c.Elapsed.Seconds()
}

// Spread returns the cell's trials' range relative to its median: (Max −
// Min) ÷ BytesPerSecond; zero for one trial.
func (c SpeedCell) Spread() float64 {
	if r := c.BytesPerSecond(); r > 0 && len(c.Trials) > 1 {
		return (c.Max - c.Min) / r
	}
	return 0
}

// NsPerOp returns the wall time per message, across all workers.
func (c SpeedCell) NsPerOp() float64 {
	if c.Ops == 0 {
		return 0
	}
	return float64(c.Elapsed.Nanoseconds()) / float64(c.Ops)
}

// medianCell returns the median trial (the lower of the two middle ones for
// an even count), with every trial's rate and their range.
func medianCell(trials []SpeedCell) SpeedCell {
	if len(trials) == 1 {
		return trials[0]
	}
	rates := make([]float64, len(trials))
	for i, t := range trials {
		rates[i] = t.BytesPerSecond()
	}
	sorted := slices.Clone(trials)
	slices.SortFunc(sorted, func(a, b SpeedCell) int { return cmp.Compare(a.BytesPerSecond(), b.BytesPerSecond()) })
	c := sorted[(len(sorted)-1)/2]
	c.Trials = rates
	c.Min, c.Max = slices.Min(rates), slices.Max(rates)
	return c
}

// SpeedRow holds one implementation's cells, in the order of the sizes.
type SpeedRow struct {
	Cipher kernels.Cipher `json:"-"`
	Name   string         `json:"cipher"` // openssl's display name, e.g. "AES-128-GCM"
	Impl   string         `json:"impl"`
	Cells  []SpeedCell    `json:"cells"`
}

// SpeedResult is the outcome of one Speed run.
type SpeedResult struct {
	Host    HostReport `json:"host"`
	Started time.Time  `json:"started"`
	Seconds float64    `json:"seconds_per_cell"` // per trial
	Trials  int        `json:"trials"`           // per cell; the cell is the median trial
	Gap     float64    `json:"seconds_between_rounds,omitempty"`
	Multi   int        `json:"multi"`
	Decrypt bool       `json:"decrypt,omitempty"`
	Sizes   []int      `json:"sizes"`
	Rows    []SpeedRow `json:"rows"`
	// Program is set on results of another program (CompareOpenSSL's).
	Program  *Program `json:"program,omitempty"`
	multiImp bool     // rows of one cipher may repeat with other implementations
}

// Speed measures throughput with `openssl speed` semantics: for every cipher
// and size, messages are processed back to back for a fixed wall-clock time,
// one fresh Seal (or Open) per message for AEADs and one continuous keystream
// or chain for other kinds, and the result is the bytes processed per second.
// It stops early, returning ctx.Err(), if ctx is done.
func Speed(ctx context.Context, cfg SpeedConfig) (*SpeedResult, error) {
	ciphers := cfg.Ciphers
	if ciphers == nil {
		ciphers = kernels.Ciphers()
	}
	sizes := cfg.Sizes
	if sizes == nil {
		sizes = DefaultSizes
	}
	d := cfg.Duration
	if d <= 0 {
		d = DefaultSeconds * time.Second
	}
	multi := max(cfg.Multi, 1)
	for _, n := range sizes {
		if n <= 0 {
			return nil, fmt.Errorf("selftest: invalid size %d", n)
		}
	}

	trials := max(cfg.Trials, 1)
	res := &SpeedResult{
		Host:     Host(),
		Started:  time.Now().UTC(),
		Seconds:  d.Seconds(),
		Trials:   trials,
		Multi:    multi,
		Decrypt:  cfg.Decrypt,
		Sizes:    sizes,
		multiImp: cfg.Impl == "all",
	}
	if trials > 1 {
		res.Gap = cfg.RoundGap.Seconds()
	}
	type cellRef struct {
		row, col int
		im       *kernels.Implementation
	}
	var refs []cellRef
	for _, c := range ciphers {
		for _, im := range speedImpls(c, cfg) {
			for j, size := range sizes {
				if size%c.BlockSize() != 0 {
					return nil, fmt.Errorf("selftest: %s works on %d-byte blocks; size %d is not a multiple", c, c.BlockSize(), size)
				}
				refs = append(refs, cellRef{row: len(res.Rows), col: j, im: im})
			}
			res.Rows = append(res.Rows, SpeedRow{Cipher: c, Name: c.DisplayName(), Impl: im.Name(), Cells: make([]SpeedCell, len(sizes))})
		}
	}
	if len(res.Rows) == 0 {
		if cfg.Impl != "" && cfg.Impl != "all" {
			return nil, fmt.Errorf("selftest: no usable implementation named %q for the chosen ciphers", cfg.Impl)
		}
		return nil, errors.New("selftest: no usable implementation for the chosen ciphers")
	}

	measured := make([][]SpeedCell, len(refs))
	for round := range trials {
		for k := range refs {
			if trials > 1 {
				k = (k + round) % len(refs) // each round starts one cell further on
			}
			ref := refs[k]
			row := &res.Rows[ref.row]
			size := sizes[ref.col]
			if trials == 1 {
				cfg.progressStart(row.Name, d, size)
			}
			cell, err := measureCell(ctx, ref.im, size, d, multi, cfg.Decrypt)
			if err != nil {
				return nil, err
			}
			if trials == 1 {
				cfg.progressEnd(row.Name, cell)
			}
			measured[k] = append(measured[k], cell)
		}
		for k, ref := range refs {
			c := medianCell(measured[k])
			c.Rate = c.BytesPerSecond()
			res.Rows[ref.row].Cells[ref.col] = c
		}
		if cfg.Round != nil && trials > 1 {
			snap := *res
			snap.Rows = slices.Clone(res.Rows)
			for i := range snap.Rows {
				snap.Rows[i].Cells = slices.Clone(snap.Rows[i].Cells)
			}
			cfg.Round(&snap, round+1, trials)
		}
		if round < trials-1 && cfg.RoundGap > 0 {
			if err := sleepCtx(ctx, cfg.RoundGap); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// sleepCtx waits d, or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// speedImpls returns the implementations of c that cfg asks for.
func speedImpls(c kernels.Cipher, cfg SpeedConfig) []*kernels.Implementation {
	var usable []*kernels.Implementation
	if cfg.KAT != nil {
		usable = cfg.KAT.Usable(c)
	} else {
		usable = kernels.Available(c)
	}
	switch cfg.Impl {
	case "":
		if len(usable) > 0 {
			return usable[:1]
		}
		return nil
	case "all":
		return usable
	}
	for _, im := range usable {
		if im.Name() == cfg.Impl {
			return []*kernels.Implementation{im}
		}
	}
	return nil
}

func (cfg SpeedConfig) progressStart(name string, d time.Duration, size int) {
	if cfg.Progress == nil {
		return
	}
	if cfg.ProgressMR {
		fmt.Fprintf(cfg.Progress, "+DT:%s:%g:%d\n", name, d.Seconds(), size)
	} else {
		fmt.Fprintf(cfg.Progress, "Doing %s for %gs on %d size blocks: ", name, d.Seconds(), size)
	}
}

func (cfg SpeedConfig) progressEnd(name string, c SpeedCell) {
	if cfg.Progress == nil {
		return
	}
	if cfg.ProgressMR {
		fmt.Fprintf(cfg.Progress, "+R:%d:%s:%f\n", c.Ops, name, c.Elapsed.Seconds())
	} else {
		fmt.Fprintf(cfg.Progress, "%d %s's in %.2fs\n", c.Ops, name, c.Elapsed.Seconds())
	}
}

// measureCell runs multi workers on messages of size bytes for d.
func measureCell(ctx context.Context, im *kernels.Implementation, size int, d time.Duration, multi int, decrypt bool) (SpeedCell, error) {
	ops := make([]func(), multi)
	for i := range ops {
		op, err := newSpeedOp(im, size, decrypt)
		if err != nil {
			return SpeedCell{}, err
		}
		op() // touch every buffer once before the clock starts
		ops[i] = op
	}
	counts, elapsed, err := runTimed(ctx, ops, d)
	cell := SpeedCell{Size: size, Elapsed: elapsed}
	for _, n := range counts {
		cell.Ops += n
	}
	if multi > 1 {
		cell.WorkerOps = counts
	}
	cell.Rate = cell.BytesPerSecond()
	return cell, err
}

// runTimed runs every op in its own goroutine, back to back, until d has
// passed or ctx is done, and returns each one's count and the wall time from
// the common start until the last worker stopped.
func runTimed(ctx context.Context, ops []func(), d time.Duration) ([]int64, time.Duration, error) {
	counts := make([]int64, len(ops))
	var (
		stop   atomic.Bool
		wg     sync.WaitGroup
		ready  sync.WaitGroup
		starts = make(chan struct{})
	)
	for i, op := range ops {
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			<-starts
			// At least one operation each, however late the scheduler runs
			// this worker on a loaded machine.
			var n int64
			for {
				op()
				n++
				if stop.Load() {
					break
				}
			}
			counts[i] = n
		}()
	}
	ready.Wait()
	runtime.Gosched()
	// The clock starts before the timer, so that the time measured is never
	// shorter than d, however long this goroutine waits between the two.
	start := time.Now()
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	unwatch := context.AfterFunc(ctx, func() { stop.Store(true) })
	close(starts)
	wg.Wait()
	elapsed := time.Since(start)
	timer.Stop()
	unwatch()
	return counts, elapsed, ctx.Err()
}

// newSpeedOp returns a function that processes one message of size bytes with
// its own cipher instance and buffers, and allocates nothing per call.
func newSpeedOp(im *kernels.Implementation, size int, decrypt bool) (func(), error) {
	c := im.Cipher()
	key := make([]byte, c.KeySize())
	iv := make([]byte, c.IVSize())
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	switch c.Kind() {
	case kernels.KindAEAD:
		aead, err := im.NewAEAD(key)
		if err != nil {
			return nil, err
		}
		return aeadOp(aead, iv, buf, decrypt)
	case kernels.KindStream:
		// Recreate the keystream well before any 32-bit block counter could
		// run out (ChaCha20 stops at 2^32 blocks), whatever the duration.
		const rekeyBytes = 1 << 30
		s, err := im.NewStream(key, iv)
		if err != nil {
			return nil, err
		}
		var done int
		return func() {
			if done += len(buf); done > rekeyBytes {
				s, _ = im.NewStream(key, iv)
				done = len(buf)
			}
			s.XORKeyStream(buf, buf)
		}, nil
	case kernels.KindBlockMode:
		newMode := im.NewEncrypter
		if decrypt {
			newMode = im.NewDecrypter
		}
		m, err := newMode(key, iv)
		if err != nil {
			return nil, err
		}
		return func() { m.CryptBlocks(buf, buf) }, nil
	}
	return nil, fmt.Errorf("selftest: cannot measure %s", im)
}

// aeadOp seals a fresh message per call under an incrementing nonce, or opens
// one fixed sealed message. Like `openssl speed -evp`, no additional data.
func aeadOp(aead cipher.AEAD, nonce, pt []byte, decrypt bool) (func(), error) {
	out := make([]byte, 0, len(pt)+aead.Overhead())
	if decrypt {
		ct := aead.Seal(nil, nonce, pt, nil)
		var err error
		return func() {
			out, err = aead.Open(out[:0], nonce, ct, nil)
			if err != nil {
				panic("selftest: speed: Open failed on its own ciphertext: " + err.Error())
			}
		}, nil
	}
	var ctr uint64
	return func() {
		ctr++
		binary.LittleEndian.PutUint64(nonce, ctr)
		out = aead.Seal(out[:0], nonce, pt, nil)
	}, nil
}
