package selftest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
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

// profileSizes are the message sizes of the quick profile: a small message and
// the sealed format's 16 KiB chunk. The decision scores the chunk size.
var profileSizes = []int{1024, 16384}

const scoreSize = 16384

// DefaultCandidates returns the AEADs for new data in order of preference:
// AES-GCM first when the CPU has AES and carry-less multiply instructions
// (AES-256 before AES-128), ChaCha20-Poly1305 first otherwise, where software
// AES is slow and not constant-time.
func DefaultCandidates() []kernels.Cipher {
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
	// Nil means DefaultCandidates(). Restrict it for compliance, e.g. to
	// AES-GCM only.
	Candidates []kernels.Cipher

	// Pin, when non-zero, is the AEAD for new data whatever the measurements
	// say. It must be usable and, when Candidates is set, one of them.
	Pin kernels.Cipher

	// Margin by which a later candidate (or a less preferred implementation)
	// must be faster to displace an earlier one. Zero means DefaultMargin;
	// negative means none.
	Margin float64

	// Budget is the wall time the quick profile aims to spend measuring.
	// Zero means DefaultBudget.
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

// ProfileCell is the median throughput of one implementation at one size.
type ProfileCell struct {
	Cipher         string  `json:"cipher"`
	Impl           string  `json:"impl"`
	Size           int     `json:"size"`
	BytesPerSecond float64 `json:"bytes_per_second"`
}

// Choice is the implementation chosen for one cipher.
type Choice struct {
	Cipher kernels.Cipher `json:"-"`
	Name   string         `json:"cipher"`
	Impl   string         `json:"impl"`
	Reason string         `json:"reason"`
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
	Measured        time.Time      `json:"measured,omitzero"`
	ProfileTime     time.Duration  `json:"profile_ns"`
	Cached          bool           `json:"cached"`

	impls map[kernels.Cipher]*kernels.Implementation
}

// Implementation returns the implementation chosen for c, or nil if c has no
// usable implementation (or is for speed comparisons only).
func (s *Selection) Implementation(c kernels.Cipher) *kernels.Implementation { return s.impls[c] }

// ErrNoAEAD is returned by Select when no candidate AEAD is usable.
var ErrNoAEAD = errors.New("selftest: no usable AEAD among the candidates")

// Select runs the quick profile (or reuses a cached one) and chooses the
// fastest usable implementation of every service cipher and the AEAD for new
// data.
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

	s := &Selection{Host: Host(), Margin: margin, impls: make(map[kernels.Cipher]*kernels.Implementation)}
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
			zap.Bool("cached", s.Cached), zap.Duration("profile", s.ProfileTime))
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

// profile fills s.Profile from the cache or by measuring: trials rounds over
// every cell in turn, so that noise from the rest of the machine spreads over
// all cells alike, then the median of each cell.
func (s *Selection) profile(ctx context.Context, cfg SelectConfig) error {
	targets := profileTargets(cfg.KAT)
	key := newCacheKey(s.Host, targets)
	if cfg.CacheDir != "" {
		if e, err := loadProfile(cfg.CacheDir, key); err == nil {
			s.Profile, s.Measured, s.ProfileTime, s.Cached = e.Profile, e.Measured, e.Duration, true
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
	cells := len(targets) * len(profileSizes)
	if cells == 0 {
		return nil
	}
	per := max(budget/time.Duration(cells*trials), time.Millisecond)

	start := time.Now()
	rates := make([][]float64, cells)
	for range trials {
		for i, im := range targets {
			for j, size := range profileSizes {
				cell, err := measureCell(ctx, im, size, per, 1, false)
				if err != nil {
					return err
				}
				k := i*len(profileSizes) + j
				rates[k] = append(rates[k], cell.BytesPerSecond())
			}
		}
	}
	for i, im := range targets {
		for j, size := range profileSizes {
			s.Profile = append(s.Profile, ProfileCell{
				Cipher: im.Cipher().String(), Impl: im.Name(), Size: size,
				BytesPerSecond: median(rates[i*len(profileSizes)+j]),
			})
		}
	}
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

// score returns the profiled throughput of c's implementation impl at the
// scoring size, or 0 if it was not measured.
func (s *Selection) score(c kernels.Cipher, impl string) float64 {
	for _, p := range s.Profile {
		if p.Cipher == c.String() && p.Impl == impl && p.Size == scoreSize {
			return p.BytesPerSecond
		}
	}
	return 0
}

// chooseImplementations picks, for every service cipher, the most preferred
// usable implementation unless another was measured faster by the margin.
func (s *Selection) chooseImplementations(kat *KATReport) {
	for _, c := range kernels.Ciphers() {
		usable := kat.Usable(c)
		if c.SpeedOnly() || len(usable) == 0 {
			continue
		}
		best, reason := usable[0], "only implementation that passed the self-test"
		if len(usable) > 1 {
			reason = "preferred implementation (not measured)"
			bestScore := s.score(c, best.Name())
			if bestScore > 0 {
				reason = fmt.Sprintf("fastest at %d bytes: %.0f MB/s", scoreSize, bestScore/1e6)
			}
			for _, im := range usable[1:] {
				if sc := s.score(c, im.Name()); bestScore > 0 && sc > bestScore*(1+s.Margin) {
					best, bestScore = im, sc
					reason = fmt.Sprintf("fastest at %d bytes: %.0f MB/s", scoreSize, sc/1e6)
				}
			}
		}
		s.impls[c] = best
		s.Implementations = append(s.Implementations, Choice{Cipher: c, Name: c.String(), Impl: best.Name(), Reason: reason})
	}
}

// chooseAEAD picks the AEAD for new data: the pinned one, or the first usable
// candidate unless a later one is faster by the margin.
func (s *Selection) chooseAEAD(candidates []kernels.Cipher, pin kernels.Cipher) error {
	if pin != 0 {
		if s.impls[pin] == nil {
			return fmt.Errorf("%w: pinned %s has no usable implementation", ErrNoAEAD, pin)
		}
		s.AEAD, s.AEADName, s.AEADReason = pin, pin.String(), "pinned by configuration"
		return nil
	}
	var best kernels.Cipher
	var bestScore float64
	for _, c := range candidates {
		im := s.impls[c]
		if im == nil {
			continue
		}
		sc := s.score(c, im.Name())
		switch {
		case best == 0:
			best, bestScore = c, sc
			s.AEADReason = "first usable candidate in order of preference"
			if sc > 0 {
				s.AEADReason = fmt.Sprintf("preferred, %.0f MB/s at %d bytes, not beaten by %.0f%%", sc/1e6, scoreSize, s.Margin*100)
			}
		case sc > 0 && bestScore > 0 && sc > bestScore*(1+s.Margin):
			s.AEADReason = fmt.Sprintf("%.0f MB/s at %d bytes, %.1f%% faster than %s", sc/1e6, scoreSize, (sc/bestScore-1)*100, best)
			best, bestScore = c, sc
		}
	}
	if best == 0 {
		return ErrNoAEAD
	}
	s.AEAD, s.AEADName = best, best.String()
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
