package selftest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/cipherd/cipherd/kernels"
)

// Defaults of SelectConfig.
const (
	DefaultMargin = 0.05
	DefaultBudget = 500 * time.Millisecond
	DefaultTrials = 5
)

// noiseFactor scales the noise measured between two implementations into
// the margin one must win by. The noise is the spread of their
// trial-by-trial ratios (1.4826 × the median absolute deviation, an
// estimate of the standard deviation that one preempted trial cannot
// inflate), and the uncertainty of the median ratio is that over √trials. A
// challenger displaces the incumbent only when its median advantage exceeds
// the larger of the configured margin and noiseFactor such uncertainties,
// and it was faster in at least three trials of four: a choice that close
// to even is left to the order of preference, so that it does not change
// from one start to the next.
const noiseFactor = 3

// maxExtraTrials bounds the trials added while a comparison is undecided
// (the challenger's median beat the configured margin but not the noise):
// up to this fraction of Trials more rounds, each as long as the first.
const maxExtraTrials = 0.6

// classMarginFactor scales the margin for size classes: a class changes
// only the speed of short one-shot messages, where the figures are the
// noisiest, and a choice that differs from one start to the next is worth
// less there than a few per cent.
const classMarginFactor = 2

// classMinGain is the least advantage that moves a size class off the
// chunk size's implementation, whatever the noise: below it a class saves
// a few nanoseconds a message, and where two implementations are that
// close (kernels of one family at the smallest sizes,
// BenchmarkSeal/aes-*-gcm/*/16) a margin sized from the noise alone lets
// the class change from one start to the next. A true advantage near it
// flips the class as surely; the kernels avoid one by running the faster
// code at such sizes themselves, and say so (Implementation.CodeAt), and
// two implementations that run one code are not compared (sameCode).
const classMinGain = 0.25

// classMargin is the margin a size class's challenger must beat.
func classMargin(margin float64) float64 { return max(classMarginFactor*margin, classMinGain) }

// scoreSize is the size that decides the implementation of a cipher and the
// AEAD for new data: the sealed format's 16 KiB chunk, which every stream
// and every large message is made of.
const scoreSize = 16384

// profileSizes returns the quick profile's sizes for c: for the sealed
// format's AEADs, openssl's sizes up to the chunk, so that each size class
// of one-shot messages gets its fastest implementation; for the other
// ciphers the scoring size alone, which is all their choice looks at.
func profileSizes(c kernels.Cipher) []int {
	if c.Kind() == kernels.KindAEAD && c != kernels.XChaCha20Poly1305 {
		return []int{16, 64, 256, 1024, scoreSize}
	}
	return []int{scoreSize}
}

// DefaultCandidates returns the AEADs for new data when the operator allows
// no others: the two with 256-bit keys, in order of preference. AES-256-GCM
// comes first when the CPU has AES and carry-less multiply instructions,
// ChaCha20-Poly1305 first otherwise, where software AES is slow and not
// constant-time. AES-128-GCM is never chosen unless allowed (Candidates).
func DefaultCandidates() []kernels.Cipher {
	if kernels.HardwareAES() {
		return []kernels.Cipher{kernels.AES256GCM, kernels.ChaCha20Poly1305}
	}
	return []kernels.Cipher{kernels.ChaCha20Poly1305, kernels.AES256GCM}
}

// AllCandidates returns every AEAD that can seal new data, in order of
// preference: DefaultCandidates with AES-128-GCM after AES-256-GCM. Filter
// it to the operator's allowed set to keep that order.
func AllCandidates() []kernels.Cipher {
	if kernels.HardwareAES() {
		return []kernels.Cipher{kernels.AES256GCM, kernels.AES128GCM, kernels.ChaCha20Poly1305}
	}
	return []kernels.Cipher{kernels.ChaCha20Poly1305, kernels.AES256GCM, kernels.AES128GCM}
}

// SelectConfig says how Select decides.
type SelectConfig struct {
	// KAT is the known-answer report; only implementations that passed it are
	// chosen. Required.
	KAT *KATReport

	// Candidates are the AEADs allowed for new data, in order of preference.
	// Nil means DefaultCandidates(): the AEADs with 256-bit keys. Restrict it
	// for compliance (AES-GCM only), or widen it (AllCandidates) to allow
	// AES-128-GCM.
	Candidates []kernels.Cipher

	// Pin, when non-zero, is the AEAD for new data whatever the measurements
	// say. It must be usable and, when Candidates is set, one of them.
	Pin kernels.Cipher

	// Margin is the least advantage by which a later candidate (or a less
	// preferred implementation) must be faster to displace an earlier one;
	// the margin used grows with the noise measured (noiseFactor). Zero means
	// DefaultMargin; negative means none beyond the noise.
	Margin float64

	// Budget is the wall time the quick profile aims to spend measuring
	// Trials rounds; undecided comparisons may add rounds, up to twice as
	// many. Zero means DefaultBudget.
	Budget time.Duration

	// Trials per profile cell; the median decides. Zero means DefaultTrials.
	Trials int

	// SkipBenchmark decides by order of preference alone, measuring nothing.
	SkipBenchmark bool

	// CacheDir, when set, keeps the profile in a file keyed by the CPU, the
	// binary's build ID and GOMAXPROCS, and reuses it on the next start.
	CacheDir string

	// Logger receives the decision. Nil means no logging.
	Logger *zap.Logger
}

// ProfileCell is one implementation at one size in the quick profile: the
// median throughput of its trials, their range, and every trial's figure in
// the order of the rounds (trial i of every cell ran in round i, so that
// two cells' trials can be compared pairwise).
type ProfileCell struct {
	Cipher         string        `json:"cipher"`
	Impl           string        `json:"impl"`
	Size           int           `json:"size"`
	BytesPerSecond float64       `json:"bytes_per_second"`
	Min            float64       `json:"min_bytes_per_second"`
	Max            float64       `json:"max_bytes_per_second"`
	TrialTime      time.Duration `json:"trial_ns"`
	Rates          []float64     `json:"trials_bytes_per_second"`
}

// SizeClass is the implementation used for one-shot messages of at most
// MaxSize bytes (and more than the previous class's MaxSize).
type SizeClass struct {
	MaxSize int                     `json:"max_size"`
	Impl    string                  `json:"impl"`
	Reason  string                  `json:"reason"`
	im      *kernels.Implementation // nil in a Selection read back from JSON
}

// Choice is the implementation chosen for one cipher: Impl for its 16 KiB
// chunks and for anything larger than the last size class, and for the
// sealed format's AEADs one implementation per size class below that.
type Choice struct {
	Cipher kernels.Cipher `json:"-"`
	Name   string         `json:"cipher"`
	Impl   string         `json:"impl"`
	Reason string         `json:"reason"`
	Sizes  []SizeClass    `json:"size_classes,omitempty"`
}

// Selection is the outcome of Select.
type Selection struct {
	Host            HostReport     `json:"host"`
	Implementations []Choice       `json:"implementations"`
	AEAD            kernels.Cipher `json:"-"`
	AEADName        string         `json:"aead"`
	AEADReason      string         `json:"aead_reason"`
	Candidates      []string       `json:"candidates"`
	Margin          float64        `json:"margin"`
	Profile         []ProfileCell  `json:"profile,omitempty"`
	Trials          int            `json:"trials,omitempty"`
	Measured        time.Time      `json:"measured,omitzero"`
	ProfileTime     time.Duration  `json:"profile_ns"`
	Cached          bool           `json:"cached"`

	impls map[kernels.Cipher]*kernels.Implementation
	sizes map[kernels.Cipher][]SizeClass
}

// Implementation returns the implementation chosen for c's 16 KiB chunks
// and large messages, or nil if c has no usable implementation (or is for
// speed comparisons only).
func (s *Selection) Implementation(c kernels.Cipher) *kernels.Implementation { return s.impls[c] }

// SizeClasses returns the implementations chosen for c's one-shot messages
// by size, smallest class first, for cryptosvc.Config.SizeClasses: a message
// of n bytes uses the first class whose MaxSize is at least n, and
// Implementation(c) past the last. Nil when c has no classes.
func (s *Selection) SizeClasses(c kernels.Cipher) []SizeClass { return s.sizes[c] }

// Implementation returns the class's implementation.
func (sc SizeClass) Implementation() *kernels.Implementation { return sc.im }

// ErrNoAEAD is returned by Select when no candidate AEAD is usable.
var ErrNoAEAD = errors.New("selftest: no usable AEAD among the candidates")

// Select runs the quick profile (or reuses a cached one) and chooses the
// fastest usable implementation of every service cipher, per size class for
// the sealed format's AEADs, and the AEAD for new data.
func Select(ctx context.Context, cfg SelectConfig) (*Selection, error) {
	if cfg.KAT == nil {
		return nil, errors.New("selftest: Select needs a KAT report")
	}
	candidates := cfg.Candidates
	if candidates == nil {
		candidates = DefaultCandidates()
	}
	margin := cfg.Margin
	switch {
	case margin == 0:
		margin = DefaultMargin
	case margin < 0:
		margin = 0
	}
	for _, c := range append(slices.Clip(candidates), cfg.Pin) {
		if c != 0 && (c.Kind() != kernels.KindAEAD || c.SpeedOnly()) {
			return nil, fmt.Errorf("selftest: %s cannot seal new data: not an AEAD", c)
		}
	}
	if cfg.Pin != 0 && cfg.Candidates != nil && !slices.Contains(candidates, cfg.Pin) {
		return nil, fmt.Errorf("selftest: pinned AEAD %s is not among the candidates", cfg.Pin)
	}

	s := &Selection{Host: Host(), Margin: margin,
		impls: make(map[kernels.Cipher]*kernels.Implementation), sizes: make(map[kernels.Cipher][]SizeClass)}
	for _, c := range candidates {
		s.Candidates = append(s.Candidates, c.String())
	}
	if !cfg.SkipBenchmark {
		if err := s.profile(ctx, cfg); err != nil {
			return nil, err
		}
	}
	s.chooseImplementations(cfg.KAT)
	if err := s.chooseAEAD(candidates, cfg.Pin); err != nil {
		return nil, err
	}
	if cfg.Logger != nil {
		cfg.Logger.Info("cipher selection",
			zap.String("aead", s.AEADName), zap.String("reason", s.AEADReason),
			zap.Bool("cached", s.Cached), zap.Int("trials", s.Trials), zap.Duration("profile", s.ProfileTime))
	}
	return s, nil
}

// profileTargets lists the implementations the quick profile measures: every
// usable AEAD implementation, and the implementations of any other service
// cipher that has more than one to choose from.
func profileTargets(kat *KATReport) []*kernels.Implementation {
	var out []*kernels.Implementation
	for _, c := range kernels.Ciphers() {
		usable := kat.Usable(c)
		if c.SpeedOnly() || len(usable) == 0 || c.Kind() != kernels.KindAEAD && len(usable) < 2 {
			continue
		}
		out = append(out, usable...)
	}
	return out
}

// profileCell is one cell of the profile being measured.
type profileCell struct {
	im    *kernels.Implementation
	size  int
	rates []float64
}

// profile fills s.Profile from the cache or by measuring: rounds over every
// cell in turn, so that noise from the rest of the machine spreads over all
// cells alike and cells of one round can be compared pairwise; then more
// rounds, up to maxTrialFactor times the trials, while a comparison stays
// undecided.
func (s *Selection) profile(ctx context.Context, cfg SelectConfig) error {
	targets := profileTargets(cfg.KAT)
	key := newCacheKey(s.Host, targets)
	if cfg.CacheDir != "" {
		if e, err := loadProfile(cfg.CacheDir, key); err == nil {
			s.Profile, s.Measured, s.ProfileTime, s.Cached = e.Profile, e.Measured, e.Duration, true
			s.Trials = len(e.Profile[0].Rates)
			return nil
		} else if cfg.Logger != nil && !errors.Is(err, errCacheMiss) {
			cfg.Logger.Warn("speed cache unreadable; measuring", zap.Error(err))
		}
	}

	trials := cfg.Trials
	if trials <= 0 {
		trials = DefaultTrials
	}
	budget := cfg.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	var cells []*profileCell
	for _, im := range targets {
		for _, size := range profileSizes(im.Cipher()) {
			cells = append(cells, &profileCell{im: im, size: size})
		}
	}
	if len(cells) == 0 {
		return nil
	}
	per := max(budget/time.Duration(len(cells)*trials), time.Millisecond).Round(10 * time.Microsecond)

	start := time.Now()
	round := func(r int) error {
		// Each round starts at another cell, so that no cell always follows
		// the same neighbour.
		for i := range cells {
			c := cells[(i+r)%len(cells)]
			cell, err := measureCell(ctx, c.im, c.size, per, 1, false)
			if err != nil {
				return err
			}
			c.rates = append(c.rates, cell.BytesPerSecond())
		}
		return nil
	}
	maxTrials := trials + int(math.Ceil(float64(trials)*maxExtraTrials))
	for r := 0; r < maxTrials; r++ {
		if r >= trials && !s.undecided(cfg.KAT, cells) {
			break
		}
		if err := round(r); err != nil {
			return err
		}
	}
	s.Profile = s.Profile[:0]
	for _, c := range cells {
		lo, hi := minMax(c.rates)
		s.Profile = append(s.Profile, ProfileCell{
			Cipher: c.im.Cipher().String(), Impl: c.im.Name(), Size: c.size,
			BytesPerSecond: median(c.rates), Min: lo, Max: hi, TrialTime: per, Rates: c.rates,
		})
	}
	s.Trials = len(cells[0].rates)
	s.Measured = start.UTC()
	s.ProfileTime = time.Since(start)
	if cfg.CacheDir != "" {
		err := storeProfile(cfg.CacheDir, cacheEntry{Key: key, Measured: s.Measured, Duration: s.ProfileTime, Profile: s.Profile})
		if err != nil && cfg.Logger != nil {
			cfg.Logger.Warn("speed cache not written", zap.Error(err))
		}
	}
	return nil
}

// undecided reports whether any comparison the choice depends on might be
// settled by more trials: a rival whose median beat the preferred
// implementation by the configured margin, but not by the noise.
func (s *Selection) undecided(kat *KATReport, cells []*profileCell) bool {
	find := func(im *kernels.Implementation, size int) []float64 {
		for _, c := range cells {
			if c.im == im && c.size == size {
				return c.rates
			}
		}
		return nil
	}
	for _, c := range kernels.Ciphers() {
		usable := kat.Usable(c)
		if len(usable) < 2 || c.SpeedOnly() {
			continue
		}
		for _, size := range profileSizes(c) {
			for _, im := range usable[1:] {
				if sameCode(usable[0], im, size) {
					continue
				}
				cmp := compareTrials(find(usable[0], size), find(im, size), s.Margin)
				if !cmp.wins && cmp.ratio > 1+s.Margin {
					return true
				}
			}
		}
	}
	return false
}

// comparison is a challenger's trials against an incumbent's, round by round.
type comparison struct {
	ratio, lo, hi float64 // median, least and greatest challenger ÷ incumbent
	noise         float64 // spread of one trial's ratio, relative (robust σ)
	trials        int
	margin        float64 // what the challenger had to win by
	wins          bool
}

// compareTrials decides whether b displaces a; see noiseFactor.
func compareTrials(a, b []float64, margin float64) comparison {
	n := min(len(a), len(b))
	var ratios []float64
	faster := 0
	for i := range n {
		if a[i] > 0 && b[i] > 0 {
			ratios = append(ratios, b[i]/a[i])
			if b[i] > a[i] {
				faster++
			}
		}
	}
	if len(ratios) == 0 {
		return comparison{margin: margin}
	}
	cmp := comparison{ratio: median(ratios), trials: len(ratios)}
	cmp.lo, cmp.hi = minMax(ratios)
	dev := make([]float64, len(ratios))
	for i, r := range ratios {
		dev[i] = math.Abs(r - cmp.ratio)
	}
	cmp.noise = 1.4826 * median(dev) / cmp.ratio
	// The median of n trials is uncertain by about 1.25 σ / √n.
	cmp.margin = max(margin, noiseFactor*1.2533*cmp.noise/math.Sqrt(float64(len(ratios))))
	cmp.wins = cmp.ratio > 1+cmp.margin && 4*faster >= 3*len(ratios)
	return cmp
}

// cell returns the profile's cell for c's implementation impl at size.
func (s *Selection) cell(c kernels.Cipher, impl string, size int) *ProfileCell {
	for i := range s.Profile {
		p := &s.Profile[i]
		if p.Cipher == c.String() && p.Impl == impl && p.Size == size {
			return p
		}
	}
	return nil
}

// describe names a cell's figures: "14,812 MB/s at 16384 bytes (median of
// 5 trials of 2ms, 14,500–15,100)".
func describe(p *ProfileCell) string {
	return fmt.Sprintf("%s MB/s at %d bytes (median of %d trials of %v, %s–%s)",
		mbps(p.BytesPerSecond), p.Size, len(p.Rates), p.TrialTime, mbps(p.Min), mbps(p.Max))
}

// against names a comparison's figures: "1.93× vaes256 (trials
// 1.85–2.01×, noise ±2.1 % per trial over 5; needed 5.0 %)".
func against(cmp comparison, rival string) string {
	return fmt.Sprintf("%.2f× %s (trials %.2f–%.2f×, noise ±%.1f %% per trial over %d; needed %.1f %%)",
		cmp.ratio, rival, cmp.lo, cmp.hi, cmp.noise*100, cmp.trials, cmp.margin*100)
}

func mbps(bps float64) string {
	v := strconv.FormatFloat(bps/1e6, 'f', 0, 64)
	if len(v) > 3 {
		v = v[:len(v)-3] + "," + v[len(v)-3:]
	}
	return v
}

// sameCode reports whether a and b run the same code for messages of size
// bytes: then their figures differ by noise alone, and however the trials
// fall, the order of preference decides between them.
func sameCode(a, b *kernels.Implementation, size int) bool {
	return a.CodeAt(size) == b.CodeAt(size)
}

// best returns the fastest of usable at size: the first (most preferred)
// unless another displaces it by compareTrials, and the reason.
func (s *Selection) best(c kernels.Cipher, usable []*kernels.Implementation, size int, margin float64) (*kernels.Implementation, string) {
	best := usable[0]
	bestCell := s.cell(c, best.Name(), size)
	if bestCell == nil || len(bestCell.Rates) == 0 {
		return best, "preferred implementation (not measured)"
	}
	var beaten []string
	reason := ""
	for _, im := range usable[1:] {
		other := s.cell(c, im.Name(), size)
		if other == nil {
			continue
		}
		if sameCode(best, im, size) {
			beaten = append(beaten, fmt.Sprintf("%s not compared: both run %s's code at %d bytes", im.Name(), best.CodeAt(size), size))
			continue
		}
		cmp := compareTrials(bestCell.Rates, other.Rates, margin)
		if cmp.wins {
			// The winner becomes the incumbent the rest must beat.
			reason = fmt.Sprintf("%s: %s, %s", im.Name(), describe(other), against(cmp, best.Name()))
			best, bestCell = im, other
			beaten = nil
			continue
		}
		beaten = append(beaten, fmt.Sprintf("%s %.2f× (needed %.1f %%)", im.Name(), cmp.ratio, cmp.margin*100))
	}
	if reason == "" {
		reason = fmt.Sprintf("%s: %s, preferred", best.Name(), describe(bestCell))
	}
	if len(beaten) > 0 {
		reason += "; " + strings.Join(beaten, ", ")
	}
	return best, reason
}

// chooseImplementations picks, for every service cipher, the most preferred
// usable implementation unless another was measured faster at the scoring
// size by the margin the noise requires; and for the sealed format's AEADs
// the same per size class of one-shot messages.
func (s *Selection) chooseImplementations(kat *KATReport) {
	for _, c := range kernels.Ciphers() {
		usable := kat.Usable(c)
		if c.SpeedOnly() || len(usable) == 0 {
			continue
		}
		best, reason := usable[0], "only implementation that passed the self-test"
		if len(usable) > 1 {
			best, reason = s.best(c, usable, scoreSize, s.Margin)
		}
		s.impls[c] = best
		ch := Choice{Cipher: c, Name: c.String(), Impl: best.Name(), Reason: reason}
		if len(usable) > 1 && s.cell(c, best.Name(), scoreSize) != nil {
			for _, size := range profileSizes(c) {
				if size >= scoreSize {
					continue
				}
				// The chunk size's winner is the incumbent of every class.
				order := append([]*kernels.Implementation{best}, slices.DeleteFunc(slices.Clone(usable), func(im *kernels.Implementation) bool { return im == best })...)
				im, why := s.best(c, order, size, classMargin(s.Margin))
				ch.Sizes = append(ch.Sizes, SizeClass{MaxSize: size, Impl: im.Name(), Reason: why, im: im})
			}
			s.sizes[c] = ch.Sizes
		}
		s.Implementations = append(s.Implementations, ch)
	}
}

// chooseAEAD picks the AEAD for new data: the pinned one, or the first usable
// candidate unless a later one is faster at the scoring size by the margin
// the noise requires, in every trial.
func (s *Selection) chooseAEAD(candidates []kernels.Cipher, pin kernels.Cipher) error {
	if pin != 0 {
		if s.impls[pin] == nil {
			return fmt.Errorf("%w: pinned %s has no usable implementation", ErrNoAEAD, pin)
		}
		s.AEAD, s.AEADName, s.AEADReason = pin, pin.String(), "pinned by configuration"
		return nil
	}
	var best kernels.Cipher
	var bestCell *ProfileCell
	var notes []string
	for _, c := range candidates {
		im := s.impls[c]
		if im == nil {
			continue
		}
		p := s.cell(c, im.Name(), scoreSize)
		switch {
		case best == 0:
			best, bestCell = c, p
		case p != nil && bestCell != nil:
			cmp := compareTrials(bestCell.Rates, p.Rates, s.Margin)
			if cmp.wins {
				notes = []string{fmt.Sprintf("%s/%s %s", c, im.Name(), against(cmp, best.String()))}
				best, bestCell = c, p
			} else {
				notes = append(notes, fmt.Sprintf("%s/%s %s, not faster by the margin", c, im.Name(), against(cmp, best.String())))
			}
		}
	}
	if best == 0 {
		return ErrNoAEAD
	}
	s.AEAD, s.AEADName = best, best.String()
	if bestCell == nil {
		s.AEADReason = "first usable candidate in order of preference (not measured)"
		return nil
	}
	s.AEADReason = fmt.Sprintf("%s/%s %s", best, bestCell.Impl, describe(bestCell))
	if len(notes) > 0 {
		s.AEADReason += "; " + strings.Join(notes, "; ")
	}
	return nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func minMax(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	return slices.Min(xs), slices.Max(xs)
}
