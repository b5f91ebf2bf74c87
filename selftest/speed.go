package selftest

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
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

	// KAT, when set, restricts measurement to implementations that passed it.
	// Nil measures every available implementation.
	KAT *KATReport

	// Progress, when set, receives a line as each cell starts and ends, in
	// openssl's words ("Doing AES-128-GCM for 3s on 16 size blocks: …"), or in
	// its -mr form ("+DT:…", "+R:…") when ProgressMR is set.
	Progress   io.Writer
	ProgressMR bool
}

// SpeedCell is one measurement: Ops messages of Size bytes in Elapsed wall time.
type SpeedCell struct {
	Size    int           `json:"size"`
	Ops     int64         `json:"ops"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// BytesPerSecond returns the cell's throughput.
func (c SpeedCell) BytesPerSecond() float64 {
	if c.Elapsed <= 0 {
		return 0
	}
	return float64(c.Ops) * float64(c.Size) / c.Elapsed.Seconds()
}

// NsPerOp returns the wall time per message, across all workers.
func (c SpeedCell) NsPerOp() float64 {
	if c.Ops == 0 {
		return 0
	}
	return float64(c.Elapsed.Nanoseconds()) / float64(c.Ops)
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
	Host     HostReport `json:"host"`
	Started  time.Time  `json:"started"`
	Seconds  float64    `json:"seconds_per_cell"`
	Multi    int        `json:"multi"`
	Decrypt  bool       `json:"decrypt,omitempty"`
	Sizes    []int      `json:"sizes"`
	Rows     []SpeedRow `json:"rows"`
	multiImp bool       // rows of one cipher may repeat with other implementations
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

	res := &SpeedResult{
		Host:     Host(),
		Started:  time.Now().UTC(),
		Seconds:  d.Seconds(),
		Multi:    multi,
		Decrypt:  cfg.Decrypt,
		Sizes:    sizes,
		multiImp: cfg.Impl == "all",
	}
	for _, c := range ciphers {
		for _, im := range speedImpls(c, cfg) {
			row := SpeedRow{Cipher: c, Name: c.DisplayName(), Impl: im.Name()}
			for _, size := range sizes {
				if size%c.BlockSize() != 0 {
					return nil, fmt.Errorf("selftest: %s works on %d-byte blocks; size %d is not a multiple", c, c.BlockSize(), size)
				}
				cfg.progressStart(row.Name, d, size)
				cell, err := measureCell(ctx, im, size, d, multi, cfg.Decrypt)
				if err != nil {
					return nil, err
				}
				cfg.progressEnd(row.Name, cell)
				row.Cells = append(row.Cells, cell)
			}
			res.Rows = append(res.Rows, row)
		}
	}
	if len(res.Rows) == 0 {
		if cfg.Impl != "" && cfg.Impl != "all" {
			return nil, fmt.Errorf("selftest: no usable implementation named %q for the chosen ciphers", cfg.Impl)
		}
		return nil, errors.New("selftest: no usable implementation for the chosen ciphers")
	}
	return res, nil
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
	n, elapsed, err := runTimed(ctx, ops, d)
	return SpeedCell{Size: size, Ops: n, Elapsed: elapsed}, err
}

// runTimed runs every op in its own goroutine, back to back, until d has
// passed or ctx is done, and returns the total count and the wall time from
// the common start until the last worker stopped.
func runTimed(ctx context.Context, ops []func(), d time.Duration) (int64, time.Duration, error) {
	var (
		stop   atomic.Bool
		total  atomic.Int64
		wg     sync.WaitGroup
		ready  sync.WaitGroup
		starts = make(chan struct{})
	)
	for _, op := range ops {
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			<-starts
			var n int64
			for { // at least one op, however late this worker starts
				op()
				n++
				if stop.Load() {
					break
				}
			}
			total.Add(n)
		}()
	}
	ready.Wait()
	runtime.Gosched()
	// The clock starts before the timer is armed: on a busy host this
	// goroutine may be descheduled in between, and the cell must not then
	// measure a stop that came before its start.
	start := time.Now()
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	unwatch := context.AfterFunc(ctx, func() { stop.Store(true) })
	close(starts)
	wg.Wait()
	elapsed := time.Since(start)
	timer.Stop()
	unwatch()
	return total.Load(), elapsed, ctx.Err()
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
