package selftest

import (
	"bytes"
	"crypto/cipher"
	"crypto/hkdf"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"
	//lint:ignore SA1019 Poly1305 itself is what the KAT checks: it is the code x/crypto's chacha20poly1305 runs.
	"golang.org/x/crypto/poly1305"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/kernels"
)

// Known-answer tests (KATs), in the manner of the FIPS 140-3 conditional
// self-tests in Go's crypto/internal/fips140: every vector is a byte literal
// taken from a published standard and named after the section it comes from,
// every cipher KAT runs once on each implementation this host can run, and an
// implementation that fails any of its KATs is never selected.
//
// Each run checks the output of the encrypting direction, the decrypting
// direction, and for AEADs that Open rejects a ciphertext with one flipped bit.
// Streams and block modes are also run in place and in uneven pieces, so that
// state carried from one call to the next is checked too.
//
// CIPHERD_SELFTEST_FAIL (or KATConfig.Fail) makes chosen KATs fail on purpose,
// to exercise the failure path: the named runs go through the same check, but
// against the implementation wrapped so that every output it produces has one
// bit flipped. The comparison has to catch it; a run that still passes is
// reported as a failure of its own ("fault injection not detected").

// ErrSelfTest is wrapped by KATReport.Err.
var ErrSelfTest = errors.New("selftest: known-answer tests failed")

// katFailEnv names the environment variable read when KATConfig.Fail is empty.
const katFailEnv = "CIPHERD_SELFTEST_FAIL"

var (
	// errKATMismatch is wrapped by every error reporting an output that differs
	// from the known answer.
	errKATMismatch = errors.New("output differs from the known answer")
	// errKATFaultUndetected is the error of an injected run whose check passed.
	errKATFaultUndetected = errors.New("fault injection not detected: the check passed on corrupted output")
)

// A KAT is one named known-answer test.
type KAT struct {
	// Name is unique and stable: the cipher or primitive, a slash, and the
	// source of the vector, e.g. "AES-128-GCM/gcm-spec-tc4".
	Name string
	// Cipher is the cipher the KAT checks, run once per implementation; 0 for a
	// primitive KAT (Poly1305, HKDF), run once.
	Cipher kernels.Cipher
	// Disables lists the ciphers turned off when a primitive KAT fails.
	Disables []kernels.Cipher
	// Fatal makes the report fatal when this primitive KAT fails (the sealed
	// format depends on HKDF).
	Fatal bool

	// Exactly one of these is set: check for cipher KATs, checkPrim for
	// primitive KATs. They take the code under test as an argument, rather than
	// reaching for it, so that fault injection can hand them a corrupted one.
	check     func(t katTarget) error
	checkPrim func(p katPrims) error
}

// KATs returns every registered KAT, in a fixed order: cipher KATs in the
// order of kernels.Ciphers, then the primitive KATs.
func KATs() []KAT {
	kats := slices.Clone(katRegistry())
	for i := range kats {
		kats[i].Disables = slices.Clone(kats[i].Disables)
	}
	return kats
}

// KATConfig configures RunKATs. The zero value runs every KAT and logs nothing.
type KATConfig struct {
	// Fail names KATs or implementations to fail on purpose, for testing the
	// failure path: a comma-separated list of KAT names
	// ("AES-128-GCM/gcm-spec-tc4"), implementation names ("aes-128-gcm/stdlib"),
	// cipher names ("aes-128-gcm", all its implementations), or "*"
	// (everything). Names are matched without regard to case. Empty means the
	// CIPHERD_SELFTEST_FAIL environment variable, if set.
	Fail string
	// Logger receives one entry per failed KAT and a summary. Nil means no
	// logging.
	Logger *zap.Logger
}

// A KATResult is the outcome of one KAT on one implementation.
type KATResult struct {
	KAT        string         `json:"kat"`
	Cipher     kernels.Cipher `json:"-"`
	CipherName string         `json:"cipher,omitempty"`
	Impl       string         `json:"impl,omitempty"` // implementation name, such as "stdlib"; "" for primitive KATs
	Err        error          `json:"-"`
	Error      string         `json:"error,omitempty"`
	Injected   bool           `json:"injected,omitempty"` // failed because KATConfig.Fail named it
	Duration   time.Duration  `json:"duration_ns"`
}

// Passed reports whether the KAT passed.
func (r KATResult) Passed() bool { return r.Err == nil && r.Error == "" }

// A KATReport is the outcome of RunKATs.
type KATReport struct {
	Results  []KATResult   `json:"results"`
	Duration time.Duration `json:"duration_ns"`

	ran      map[string]int          // implementation ("aes-128-gcm/stdlib") → KATs run on it
	failed   map[string]bool         // implementation → at least one KAT failed on it
	disabled map[kernels.Cipher]bool // turned off by a failed primitive KAT
	fatal    []string                // failed KATs marked Fatal
	prims    []KAT                   // primitive KATs run, for WriteText
}

// RunKATs runs every KAT against every available implementation. It never
// panics: a panicking implementation is recorded as a failure.
func RunKATs(cfg KATConfig) *KATReport {
	return katRun(cfg, KATs())
}

func katRun(cfg KATConfig, kats []KAT) *KATReport {
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	spec := cfg.Fail
	if spec == "" {
		spec = os.Getenv(katFailEnv)
	}
	faults := katParseFail(spec)
	if len(faults.tokens) > 0 {
		log.Warn("selftest: failing known-answer tests on purpose", zap.String("fail", spec))
	}

	r := &KATReport{
		ran:      make(map[string]int),
		failed:   make(map[string]bool),
		disabled: make(map[kernels.Cipher]bool),
	}
	start := time.Now()
	for _, k := range kats {
		if k.Cipher == 0 {
			r.prims = append(r.prims, k)
			res := katRunOne(k, nil, faults.match(k, nil))
			r.Results = append(r.Results, res)
			if !res.Passed() {
				for _, c := range k.Disables {
					r.disabled[c] = true
				}
				if k.Fatal {
					r.fatal = append(r.fatal, k.Name)
				}
				log.Error("selftest: known-answer test failed",
					zap.String("kat", k.Name), zap.Error(res.Err), zap.Bool("injected", res.Injected),
					zap.Stringers("disables", k.Disables), zap.Bool("fatal", k.Fatal))
			}
			continue
		}
		for _, im := range kernels.Available(k.Cipher) {
			res := katRunOne(k, im, faults.match(k, im))
			r.Results = append(r.Results, res)
			r.ran[im.String()]++
			if !res.Passed() {
				r.failed[im.String()] = true
				log.Error("selftest: known-answer test failed",
					zap.String("kat", k.Name), zap.String("impl", im.String()),
					zap.Error(res.Err), zap.Bool("injected", res.Injected))
			}
		}
	}
	r.Duration = time.Since(start)

	for _, tok := range faults.unused() {
		log.Warn("selftest: failure-injection entry matches no KAT, implementation or cipher", zap.String("entry", tok))
	}
	log.Info("selftest: known-answer tests done",
		zap.Int("results", len(r.Results)), zap.Int("failures", len(r.Failures())),
		zap.Int("usable_ciphers", len(r.Ciphers())), zap.Duration("duration", r.Duration))
	return r
}

// katRunOne runs one KAT on im (nil for a primitive KAT), recovering a panic
// into a failure.
func katRunOne(k KAT, im *kernels.Implementation, faulty bool) (res KATResult) {
	res = KATResult{KAT: k.Name, Cipher: k.Cipher, Injected: faulty}
	if k.Cipher != 0 {
		res.CipherName = k.Cipher.String()
	}
	if im != nil {
		res.Impl = im.Name()
	}
	start := time.Now()
	defer func() {
		res.Duration = time.Since(start)
		if p := recover(); p != nil {
			res.Err = fmt.Errorf("panic: %v", p)
		}
		if faulty && res.Err == nil {
			res.Err = errKATFaultUndetected
		}
		if res.Err != nil {
			res.Error = res.Err.Error()
		}
	}()
	switch {
	case k.checkPrim != nil && im == nil:
		res.Err = k.checkPrim(katPrimitives(faulty))
	case k.check != nil && im != nil:
		res.Err = k.check(katTarget{im: im, faulty: faulty})
	default:
		res.Err = errors.New("selftest: KAT has no check for this target")
	}
	return res
}

// Passed reports whether every KAT for im's cipher ran and passed on im, and
// no primitive KAT that disables its cipher failed.
func (r *KATReport) Passed(im *kernels.Implementation) bool {
	if r == nil || im == nil {
		return false
	}
	return r.ran[im.String()] > 0 && !r.failed[im.String()] && !r.disabled[im.Cipher()]
}

// Usable returns the implementations of c that are available and passed, in
// the registry's order of preference.
func (r *KATReport) Usable(c kernels.Cipher) []*kernels.Implementation {
	var out []*kernels.Implementation
	for _, im := range kernels.Available(c) {
		if r.Passed(im) {
			out = append(out, im)
		}
	}
	return out
}

// Ciphers returns the ciphers with at least one usable implementation.
func (r *KATReport) Ciphers() []kernels.Cipher {
	var out []kernels.Cipher
	for _, c := range kernels.Ciphers() {
		if len(r.Usable(c)) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// Failures returns the results that did not pass.
func (r *KATReport) Failures() []KATResult {
	if r == nil {
		return nil
	}
	var out []KATResult
	for _, res := range r.Results {
		if !res.Passed() {
			out = append(out, res)
		}
	}
	return out
}

// Err returns an error wrapping ErrSelfTest when a Fatal primitive KAT failed
// or no cipher has a usable implementation, and nil otherwise.
func (r *KATReport) Err() error {
	switch {
	case r == nil:
		return fmt.Errorf("%w: no report", ErrSelfTest)
	case len(r.fatal) > 0:
		return fmt.Errorf("%w: %s failed, and the sealed format depends on it", ErrSelfTest, strings.Join(r.fatal, ", "))
	case len(r.Ciphers()) == 0:
		return fmt.Errorf("%w: no cipher has an implementation that passed", ErrSelfTest)
	}
	return nil
}

// WriteText writes a human-readable report: one line per cipher and
// implementation, the primitive KATs, every failure with its error, a summary
// line and the total time.
func (r *KATReport) WriteText(w io.Writer) error {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "IMPLEMENTATION\tRESULT\tKATS\tTIME")
	for _, c := range kernels.Ciphers() {
		for _, im := range kernels.Implementations(c) {
			if !im.Available() {
				fmt.Fprintf(tw, "%s\tunavailable\t-\t-\n", im)
				continue
			}
			var n, passed int
			var d time.Duration
			for _, res := range r.Results {
				if res.Cipher == c && res.Impl == im.Name() {
					n++
					d += res.Duration
					if res.Passed() {
						passed++
					}
				}
			}
			status := "PASS"
			switch {
			case n == 0:
				status = "FAIL (not tested)"
			case passed < n:
				status = "FAIL"
			case r.disabled[c]:
				status = "FAIL (disabled by a failed primitive KAT)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\n", im, status, passed, n, katDuration(d))
		}
	}
	fmt.Fprintln(tw) // a line without cells: the next table gets its own columns
	fmt.Fprintln(tw, "PRIMITIVE\tRESULT\tTIME\tON FAILURE")
	for _, k := range r.prims {
		for _, res := range r.Results {
			if res.KAT != k.Name || res.Cipher != 0 {
				continue
			}
			status := "PASS"
			if !res.Passed() {
				status = "FAIL"
			}
			var effect []string
			if k.Fatal {
				effect = append(effect, "fatal")
			}
			if len(k.Disables) > 0 {
				var names []string
				for _, c := range k.Disables {
					names = append(names, c.String())
				}
				effect = append(effect, "disables "+strings.Join(names, ", "))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.Name, status, katDuration(res.Duration), strings.Join(effect, "; "))
		}
	}
	tw.Flush()

	failures := r.Failures()
	if len(failures) > 0 {
		fmt.Fprintf(&b, "\nfailures:\n")
		for _, res := range failures {
			where := ""
			if res.Impl != "" {
				where = " on " + res.CipherName + "/" + res.Impl
			}
			note := ""
			if res.Injected {
				note = " [injected]"
			}
			fmt.Fprintf(&b, "  FAIL %s%s: %s%s\n", res.KAT, where, res.Error, note)
		}
	}

	verdict := "PASS"
	if err := r.Err(); err != nil {
		verdict = "FAIL"
	} else if len(failures) > 0 {
		verdict = "DEGRADED"
	}
	fmt.Fprintf(&b, "\n%s: %d of %d known-answer runs passed; %d of %d ciphers usable",
		verdict, len(r.Results)-len(failures), len(r.Results), len(r.Ciphers()), len(kernels.Ciphers()))
	if err := r.Err(); err != nil {
		fmt.Fprintf(&b, "; %v", err)
	}
	fmt.Fprintf(&b, "\ntotal time %s\n", katDuration(r.Duration))
	_, err := w.Write(b.Bytes())
	return err
}

func katDuration(d time.Duration) string {
	if d >= time.Microsecond {
		d = d.Round(time.Microsecond)
	}
	return d.String()
}

// katFaults holds the parsed KATConfig.Fail entries.
type katFaults struct {
	tokens []string
	used   []bool
}

func katParseFail(spec string) *katFaults {
	f := &katFaults{}
	for _, tok := range strings.Split(spec, ",") {
		if tok = strings.TrimSpace(tok); tok != "" {
			f.tokens = append(f.tokens, tok)
		}
	}
	f.used = make([]bool, len(f.tokens))
	return f
}

// match reports whether any entry names KAT k on im (nil for a primitive KAT).
func (f *katFaults) match(k KAT, im *kernels.Implementation) bool {
	hit := false
	for i, tok := range f.tokens {
		if tok == "*" || strings.EqualFold(tok, k.Name) ||
			im != nil && (strings.EqualFold(tok, im.String()) || strings.EqualFold(tok, im.Cipher().String())) {
			f.used[i] = true
			hit = true
		}
	}
	return hit
}

func (f *katFaults) unused() []string {
	var out []string
	for i, tok := range f.tokens {
		if !f.used[i] {
			out = append(out, tok)
		}
	}
	return out
}

// katTarget is the code a cipher KAT runs against: one implementation's
// constructors, or under fault injection the same constructors wrapped so that
// every output they produce has its first bit flipped.
type katTarget struct {
	im     *kernels.Implementation
	faulty bool
}

func (t katTarget) newAEAD(key []byte) (cipher.AEAD, error) {
	a, err := t.im.NewAEAD(key)
	if err != nil || !t.faulty {
		return a, err
	}
	return katFaultyAEAD{a}, nil
}

func (t katTarget) newStream(key, iv []byte) (cipher.Stream, error) {
	s, err := t.im.NewStream(key, iv)
	if err != nil || !t.faulty {
		return s, err
	}
	return katFaultyStream{s}, nil
}

func (t katTarget) newMode(key, iv []byte, decrypt bool) (cipher.BlockMode, error) {
	newMode := t.im.NewEncrypter
	if decrypt {
		newMode = t.im.NewDecrypter
	}
	m, err := newMode(key, iv)
	if err != nil || !t.faulty {
		return m, err
	}
	return katFaultyMode{m}, nil
}

type katFaultyAEAD struct{ cipher.AEAD }

func (a katFaultyAEAD) Seal(dst, nonce, plaintext, additionalData []byte) []byte {
	out := a.AEAD.Seal(dst, nonce, plaintext, additionalData)
	katFlip(out[len(dst):])
	return out
}

func (a katFaultyAEAD) Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error) {
	out, err := a.AEAD.Open(dst, nonce, ciphertext, additionalData)
	if err == nil {
		katFlip(out[len(dst):])
	}
	return out, err
}

type katFaultyStream struct{ cipher.Stream }

func (s katFaultyStream) XORKeyStream(dst, src []byte) {
	s.Stream.XORKeyStream(dst, src)
	katFlip(dst[:len(src)])
}

type katFaultyMode struct{ cipher.BlockMode }

func (m katFaultyMode) CryptBlocks(dst, src []byte) {
	m.BlockMode.CryptBlocks(dst, src)
	katFlip(dst[:len(src)])
}

func katFlip(b []byte) {
	if len(b) > 0 {
		b[0] ^= 0x01
	}
}

// katPrims is the primitive code the primitive KATs check, as function values
// so that fault injection can wrap them.
type katPrims struct {
	poly1305    func(out *[16]byte, msg []byte, key *[32]byte)
	hkdfExtract func(h func() hash.Hash, secret, salt []byte) ([]byte, error)
	hkdfExpand  func(h func() hash.Hash, prk []byte, info string, n int) ([]byte, error)
	hkdfKey     func(h func() hash.Hash, secret, salt []byte, info string, n int) ([]byte, error)
	// formatExpand is the sealed format's own HKDF-Expand-SHA-512 on the
	// worked example's inputs (cryptosvc.ExpandKnownAnswers).
	formatExpand func() []cryptosvc.KnownAnswer
}

func katPrimitives(faulty bool) katPrims {
	p := katPrims{
		poly1305:     poly1305.Sum,
		hkdfExtract:  hkdf.Extract[hash.Hash],
		hkdfExpand:   hkdf.Expand[hash.Hash],
		hkdfKey:      hkdf.Key[hash.Hash],
		formatExpand: cryptosvc.ExpandKnownAnswers,
	}
	if !faulty {
		return p
	}
	return katPrims{
		poly1305: func(out *[16]byte, msg []byte, key *[32]byte) {
			p.poly1305(out, msg, key)
			katFlip(out[:])
		},
		hkdfExtract: func(h func() hash.Hash, secret, salt []byte) ([]byte, error) {
			b, err := p.hkdfExtract(h, secret, salt)
			katFlip(b)
			return b, err
		},
		hkdfExpand: func(h func() hash.Hash, prk []byte, info string, n int) ([]byte, error) {
			b, err := p.hkdfExpand(h, prk, info, n)
			katFlip(b)
			return b, err
		},
		hkdfKey: func(h func() hash.Hash, secret, salt []byte, info string, n int) ([]byte, error) {
			b, err := p.hkdfKey(h, secret, salt, info, n)
			katFlip(b)
			return b, err
		},
		formatExpand: func() []cryptosvc.KnownAnswer {
			answers := p.formatExpand()
			for _, a := range answers {
				katFlip(a.Got)
			}
			return answers
		},
	}
}

// katFormat checks the sealed format's known answers (cryptosvc.KnownAnswers)
// with the implementation under test: the message sealed with it, the
// plaintext it opens, and the key derivations on the way.
func katFormat(t katTarget) error {
	answers, err := cryptosvc.KnownAnswers(t.im)
	if err != nil {
		return err
	}
	for _, a := range answers {
		if t.faulty {
			katFlip(a.Got)
		}
		if err := katCompare(a.Name, a.Got, a.Want); err != nil {
			return err
		}
	}
	return nil
}

// katFormatExpand checks the sealed format's own HKDF-Expand-SHA-512.
func katFormatExpand(p katPrims) error {
	for _, a := range p.formatExpand() {
		if err := katCompare(a.Name, a.Got, a.Want); err != nil {
			return err
		}
	}
	return nil
}

// katCompare returns nil when got equals want. Its error names the operation
// and the first differing offset, never the bytes.
func katCompare(what string, got, want []byte) error {
	if bytes.Equal(got, want) {
		return nil
	}
	if len(got) != len(want) {
		return fmt.Errorf("%s: %w: %d bytes, want %d", what, errKATMismatch, len(got), len(want))
	}
	i := 0
	for got[i] == want[i] {
		i++
	}
	return fmt.Errorf("%s: %w at byte %d of %d", what, errKATMismatch, i, len(want))
}
