package selftest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/kernels"
)

// quick keeps selection tests fast; the real budget is exercised by
// `cipherd selftest`, whose profile time is reported, not asserted.
const quick = 20 * time.Millisecond

func TestSelect(t *testing.T) {
	kat := RunKATs(KATConfig{})
	s, err := Select(context.Background(), SelectConfig{KAT: kat, Budget: quick})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(DefaultCandidates(), s.AEAD) || s.AEADName != s.AEAD.String() || s.AEADReason == "" {
		t.Fatalf("AEAD %v (%q, %q) not a default candidate", s.AEAD, s.AEADName, s.AEADReason)
	}
	for _, c := range kernels.Ciphers() {
		im := s.Implementation(c)
		switch {
		case c.SpeedOnly() && im != nil:
			t.Errorf("%s is for speed only but was selected", c)
		case !c.SpeedOnly() && (im == nil || im.Cipher() != c || !kat.Passed(im)):
			t.Errorf("%s: selected %v", c, im)
		}
	}
	// Every usable AEAD implementation was profiled at both sizes.
	for _, c := range kernels.Ciphers() {
		if c.Kind() != kernels.KindAEAD {
			continue
		}
		for _, im := range kat.Usable(c) {
			for _, size := range profileSizes(c) {
				if !slices.ContainsFunc(s.Profile, func(p ProfileCell) bool {
					return p.Cipher == c.String() && p.Impl == im.Name() && p.Size == size && p.BytesPerSecond > 0
				}) {
					t.Errorf("profile lacks %s at %d bytes", im, size)
				}
			}
		}
	}
	if s.Cached || s.Measured.IsZero() || s.ProfileTime <= 0 {
		t.Errorf("fresh profile reported as cached=%v measured=%v in %v", s.Cached, s.Measured, s.ProfileTime)
	}
	t.Logf("quick profile (budget %v) took %v; AEAD %s: %s", quick, s.ProfileTime, s.AEADName, s.AEADReason)
}

func TestSelectConfiguration(t *testing.T) {
	kat := RunKATs(KATConfig{})
	ctx := context.Background()

	s, err := Select(ctx, SelectConfig{KAT: kat, Budget: quick, Pin: kernels.ChaCha20Poly1305})
	if err != nil || s.AEAD != kernels.ChaCha20Poly1305 || s.AEADReason != "pinned by configuration" {
		t.Fatalf("pin: %v %v", s, err)
	}
	gcmOnly := []kernels.Cipher{kernels.AES256GCM, kernels.AES128GCM}
	s, err = Select(ctx, SelectConfig{KAT: kat, Budget: quick, Candidates: gcmOnly})
	if err != nil || !slices.Contains(gcmOnly, s.AEAD) {
		t.Fatalf("AES-GCM only: %v %v", s, err)
	}
	s, err = Select(ctx, SelectConfig{KAT: kat, SkipBenchmark: true})
	if err != nil || s.AEAD != DefaultCandidates()[0] || len(s.Profile) != 0 {
		t.Fatalf("skip benchmark: %+v %v", s, err)
	}

	for name, cfg := range map[string]SelectConfig{
		"no KAT":               {},
		"pin not a candidate":  {KAT: kat, Candidates: gcmOnly, Pin: kernels.ChaCha20Poly1305},
		"pin not an AEAD":      {KAT: kat, Pin: kernels.AES128CTR},
		"candidate speed-only": {KAT: kat, Candidates: []kernels.Cipher{kernels.AES128CBC}},
	} {
		cfg.SkipBenchmark = true
		if _, err := Select(ctx, cfg); err == nil {
			t.Errorf("%s: Select succeeded", name)
		}
	}
}

func TestSelectHonoursKATFailures(t *testing.T) {
	ctx := context.Background()
	kat := RunKATs(KATConfig{Fail: "aes-256-gcm"})
	s, err := Select(ctx, SelectConfig{KAT: kat, Budget: quick})
	if err != nil {
		t.Fatal(err)
	}
	if s.AEAD == kernels.AES256GCM || s.Implementation(kernels.AES256GCM) != nil {
		t.Fatalf("chose AES-256-GCM after it failed its KATs")
	}
	if slices.ContainsFunc(s.Profile, func(p ProfileCell) bool { return p.Cipher == "aes-256-gcm" }) {
		t.Fatalf("profiled a failed implementation")
	}
	if _, err := Select(ctx, SelectConfig{KAT: kat, Pin: kernels.AES256GCM, SkipBenchmark: true}); !errors.Is(err, ErrNoAEAD) {
		t.Fatalf("pinning a failed AEAD: err = %v, want ErrNoAEAD", err)
	}
	kat = RunKATs(KATConfig{Fail: "aes-256-gcm,aes-128-gcm,chacha20-poly1305"})
	if _, err := Select(ctx, SelectConfig{KAT: kat, SkipBenchmark: true}); !errors.Is(err, ErrNoAEAD) {
		t.Fatalf("no candidate passing: err = %v, want ErrNoAEAD", err)
	}
}

// chooseAEAD keeps the preferred candidate unless another is faster, in
// every trial, by more than the margin and three times the noise.
func TestChooseAEADMargin(t *testing.T) {
	kat := RunKATs(KATConfig{})
	candidates := []kernels.Cipher{kernels.AES256GCM, kernels.AES128GCM, kernels.ChaCha20Poly1305}
	steady := func(v float64) []float64 { return []float64{v, v, v, v, v} }
	for _, tc := range []struct {
		name  string
		rates [][]float64 // trials at 16 KiB, per candidate
		want  kernels.Cipher
	}{
		{"within the margin", [][]float64{steady(100), steady(104), steady(50)}, kernels.AES256GCM},
		{"beyond it", [][]float64{steady(100), steady(106), steady(50)}, kernels.AES128GCM},
		{"beats the incumbent, not the first", [][]float64{steady(100), steady(104), steady(109)}, kernels.ChaCha20Poly1305},
		{"must beat the incumbent by the margin", [][]float64{steady(100), steady(120), steady(121)}, kernels.AES128GCM},
		// A 10 % median advantage over trials that spread ±9 % (robust σ)
		// needs 3 × 1.25 × 9 % / √5, about 16 %.
		{"noisy", [][]float64{steady(100), {95, 103, 110, 117, 125}, steady(50)}, kernels.AES256GCM},
		// Faster in three trials of five only.
		{"not three trials of four", [][]float64{steady(100), {130, 130, 130, 99, 99}, steady(50)}, kernels.AES256GCM},
		{"clearly faster in every trial", [][]float64{{100, 102, 98, 100, 101}, {140, 141, 139, 140, 142}, steady(50)}, kernels.AES128GCM},
		{"unmeasured: order of preference", [][]float64{nil, nil, nil}, kernels.AES256GCM},
	} {
		s := &Selection{Margin: 0.05, impls: make(map[kernels.Cipher]*kernels.Implementation)}
		for i, c := range candidates {
			im := kat.Usable(c)[0]
			s.impls[c] = im
			if tc.rates[i] != nil {
				lo, hi := minMax(tc.rates[i])
				s.Profile = append(s.Profile, ProfileCell{Cipher: c.String(), Impl: im.Name(), Size: scoreSize,
					BytesPerSecond: median(tc.rates[i]), Min: lo, Max: hi, Rates: tc.rates[i]})
			}
		}
		if err := s.chooseAEAD(candidates, 0); err != nil {
			t.Fatal(err)
		}
		if s.AEAD != tc.want {
			t.Errorf("%s: chose %s, want %s (%s)", tc.name, s.AEAD, tc.want, s.AEADReason)
		}
		if tc.rates[0] != nil && !strings.Contains(s.AEADReason, "MB/s") {
			t.Errorf("%s: the reason names no figures: %s", tc.name, s.AEADReason)
		}
	}
}

// By default only the AEADs with 256-bit keys are candidates: AES-128-GCM is
// chosen only when the operator allows it, however fast it is.
func TestDefaultCandidatesAre256Bit(t *testing.T) {
	for _, c := range DefaultCandidates() {
		if c.KeySize() != 32 {
			t.Errorf("default candidate %s has a %d-bit key", c, 8*c.KeySize())
		}
	}
	if len(DefaultCandidates()) != 2 || !slices.Contains(AllCandidates(), kernels.AES128GCM) {
		t.Errorf("DefaultCandidates %v, AllCandidates %v", DefaultCandidates(), AllCandidates())
	}
	kat := RunKATs(KATConfig{})
	s, err := Select(context.Background(), SelectConfig{KAT: kat, Budget: quick})
	if err != nil {
		t.Fatal(err)
	}
	if s.AEAD == kernels.AES128GCM {
		t.Errorf("chose AES-128-GCM without being allowed: %s", s.AEADReason)
	}
	s, err = Select(context.Background(), SelectConfig{KAT: kat, Budget: quick, Candidates: AllCandidates()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("with AES-128-GCM allowed: %s (%s)", s.AEADName, s.AEADReason)
}

// Every sealed-format AEAD with rival implementations gets one size class
// per profiled size below the chunk, each naming a usable implementation.
func TestSelectSizeClasses(t *testing.T) {
	kat := RunKATs(KATConfig{})
	s, err := Select(context.Background(), SelectConfig{KAT: kat, Budget: quick})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []kernels.Cipher{kernels.AES128GCM, kernels.AES256GCM, kernels.ChaCha20Poly1305} {
		usable := kat.Usable(c)
		classes := s.SizeClasses(c)
		if len(usable) < 2 {
			if classes != nil {
				t.Errorf("%s: size classes %v with one implementation", c, classes)
			}
			continue
		}
		if len(classes) != 4 {
			t.Fatalf("%s: %d size classes, want 4 (16, 64, 256, 1024)", c, len(classes))
		}
		prev := 0
		for _, sc := range classes {
			if sc.MaxSize <= prev || sc.Implementation() == nil || !slices.Contains(usable, sc.Implementation()) || sc.Reason == "" {
				t.Errorf("%s: bad class %+v", c, sc)
			}
			prev = sc.MaxSize
			t.Logf("%s up to %d bytes: %s (%s)", c, sc.MaxSize, sc.Impl, sc.Reason)
		}
	}
}

func TestCompareTrials(t *testing.T) {
	for _, tc := range []struct {
		a, b []float64
		wins bool
	}{
		{[]float64{100, 100, 100}, []float64{110, 110, 110}, true},
		{[]float64{100, 100, 100}, []float64{104, 104, 104}, false},
		{[]float64{100, 100, 100, 100}, []float64{90, 130, 130, 130}, true}, // lost one trial of four
		{[]float64{100, 100, 100, 100}, []float64{90, 95, 130, 130}, false}, // lost two
		{nil, []float64{200}, false},
	} {
		if got := compareTrials(tc.a, tc.b, 0.05); got.wins != tc.wins {
			t.Errorf("compareTrials(%v, %v) = %+v, want wins=%v", tc.a, tc.b, got, tc.wins)
		}
	}
}

func TestSelectCache(t *testing.T) {
	dir := t.TempDir()
	kat := RunKATs(KATConfig{})
	ctx := context.Background()
	first, err := Select(ctx, SelectConfig{KAT: kat, Budget: quick, CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "speed-*.json"))
	if first.Cached || len(files) != 1 {
		t.Fatalf("first run: cached=%v, files %v", first.Cached, files)
	}
	if fi, err := os.Stat(files[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cache file mode: %v %v", fi, err)
	}
	second, err := Select(ctx, SelectConfig{KAT: kat, Budget: quick, CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !second.Cached || !reflect.DeepEqual(second.Profile, first.Profile) || second.AEAD != first.AEAD ||
		!second.Measured.Equal(first.Measured) {
		t.Fatalf("second run did not reuse the cache: %+v", second)
	}

	// A profile measured under other conditions is not reused.
	b, _ := os.ReadFile(files[0])
	os.WriteFile(files[0], []byte(strings.Replace(string(b), `"gomaxprocs"`, `"gomaxprocs_"`, 1)), 0o600)
	third, err := Select(ctx, SelectConfig{KAT: kat, Budget: quick, CacheDir: dir})
	if err != nil || third.Cached {
		t.Fatalf("mismatched key reused: cached=%v err=%v", third.Cached, err)
	}
	// Nor is a damaged file; it is measured again and rewritten.
	os.WriteFile(files[0], []byte("{not json"), 0o600)
	fourth, err := Select(ctx, SelectConfig{KAT: kat, Budget: quick, CacheDir: dir})
	if err != nil || fourth.Cached {
		t.Fatalf("damaged cache reused: cached=%v err=%v", fourth.Cached, err)
	}
	fifth, err := Select(ctx, SelectConfig{KAT: kat, Budget: quick, CacheDir: dir})
	if err != nil || !fifth.Cached {
		t.Fatalf("cache not rewritten after damage: cached=%v err=%v", fifth.Cached, err)
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, ".speed-*")); len(tmp) != 0 {
		t.Fatalf("temporary files left behind: %v", tmp)
	}
}

func TestParseCPUMax(t *testing.T) {
	for in, want := range map[string]float64{"max 100000": 0, "150000 100000\n": 1.5, "-1 100000": 0, "x y": 0, "": 0, "50000 100000": 0.5} {
		got, _ := parseCPUMax(in)
		if got != want {
			t.Errorf("parseCPUMax(%q) = %v, want %v", in, got, want)
		}
	}
}

// A size class leaves the chunk size's implementation only for a rival at
// least classMinGain faster, however steady the trials: 20 % faster at
// 64 bytes keeps the incumbent, 40 % faster takes the class.
func TestSizeClassMinGain(t *testing.T) {
	usable := kernels.Available(kernels.AES128GCM)
	if len(usable) < 2 {
		t.Skip("one implementation of AES-128-GCM here")
	}
	inc, rival := usable[0], usable[1]
	if sameCode(inc, rival, 64) {
		t.Skipf("%s and %s run one code at 64 bytes", inc, rival)
	}
	steady := func(rate float64) []float64 {
		r := make([]float64, 8)
		for i := range r {
			r[i] = rate * (1 + 0.001*float64(i%2))
		}
		return r
	}
	for _, tc := range []struct {
		gain float64
		want *kernels.Implementation
	}{{1.20, inc}, {1.40, rival}} {
		s := &Selection{Profile: []ProfileCell{
			{Cipher: "aes-128-gcm", Impl: inc.Name(), Size: 64, Rates: steady(1e9)},
			{Cipher: "aes-128-gcm", Impl: rival.Name(), Size: 64, Rates: steady(tc.gain * 1e9)},
		}}
		got, why := s.best(kernels.AES128GCM, []*kernels.Implementation{inc, rival}, 64, classMargin(DefaultMargin))
		if got != tc.want {
			t.Errorf("rival %.2f× faster: chose %s (%s), want %s", tc.gain, got.Name(), why, tc.want.Name())
		}
	}
}

// Two implementations that run one code at a size are not compared there:
// a rival 50 % faster in every trial, a figure only noise can give it,
// leaves the class to the incumbent, and the reason says why.
func TestSizeClassSameCode(t *testing.T) {
	var inc, rival *kernels.Implementation
	size := 0
	for _, c := range kernels.Ciphers() {
		usable := kernels.Available(c)
		for _, n := range profileSizes(c) {
			for _, a := range usable {
				for _, b := range usable {
					if a != b && inc == nil && sameCode(a, b, n) {
						inc, rival, size = a, b, n
					}
				}
			}
		}
	}
	if inc == nil {
		t.Skip("no two implementations here run one code at a profiled size")
	}
	c := inc.Cipher()
	s := &Selection{Profile: []ProfileCell{
		{Cipher: c.String(), Impl: inc.Name(), Size: size, Rates: []float64{1e9, 1e9, 1e9, 1e9, 1e9}},
		{Cipher: c.String(), Impl: rival.Name(), Size: size, Rates: []float64{1.5e9, 1.5e9, 1.5e9, 1.5e9, 1.5e9}},
	}}
	got, why := s.best(c, []*kernels.Implementation{inc, rival}, size, classMargin(DefaultMargin))
	if got != inc || !strings.Contains(why, rival.Name()+" not compared") {
		t.Errorf("%s at %d bytes, %s 1.5× faster: chose %s (%s), want %s", c, size, rival.Name(), got.Name(), why, inc.Name())
	}
	t.Logf("%s at %d bytes: %s", c, size, why)

	// Nor do such trials ask for more rounds, which a rival that beat the
	// margin but not the noise, in three trials of five, would.
	kat := RunKATs(KATConfig{})
	closeCall := func(n int) []*profileCell {
		return []*profileCell{
			{im: inc, size: n, rates: []float64{1e9, 1e9, 1e9, 1e9, 1e9}},
			{im: rival, size: n, rates: []float64{1.1e9, 1.1e9, 0.9e9, 1.3e9, 0.95e9}},
		}
	}
	if s.undecided(kat, closeCall(size)) {
		t.Errorf("more trials asked for %s against %s at %d bytes", rival, inc, size)
	}
	for _, n := range profileSizes(c) {
		if !sameCode(inc, rival, n) && slices.Contains(kat.Usable(c), inc) && slices.Contains(kat.Usable(c), rival) {
			if !s.undecided(kat, closeCall(n)) {
				t.Errorf("no more trials asked for %s against %s at %d bytes", rival, inc, n)
			}
			break
		}
	}
}
