package selftest

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cipherd/cipherd/kernels"
)

// katRunClean runs every KAT with no failure injection, whatever the
// environment says.
func katRunClean(t *testing.T) *KATReport {
	t.Helper()
	t.Setenv(katFailEnv, "")
	return RunKATs(KATConfig{})
}

// katExpectedRuns is the number of results a full run must produce: one per
// primitive KAT, one per available implementation for each cipher KAT.
func katExpectedRuns() int {
	n := 0
	for _, k := range KATs() {
		if k.Cipher == 0 {
			n++
		} else {
			n += len(kernels.Available(k.Cipher))
		}
	}
	return n
}

func TestKATsPassOnEveryImplementation(t *testing.T) {
	r := katRunClean(t)
	t.Logf("RunKATs: %d results in %v", len(r.Results), r.Duration)
	for _, res := range r.Failures() {
		t.Errorf("%s on %s/%s: %v", res.KAT, res.CipherName, res.Impl, res.Err)
	}
	if got, want := len(r.Results), katExpectedRuns(); got != want {
		t.Errorf("%d results, want %d", got, want)
	}
	if err := r.Err(); err != nil {
		t.Errorf("Err() = %v", err)
	}
	for _, c := range kernels.Ciphers() {
		for _, im := range kernels.Implementations(c) {
			if got := r.Passed(im); got != im.Available() {
				t.Errorf("Passed(%s) = %v, available %v", im, got, im.Available())
			}
		}
		if got, want := r.Usable(c), kernels.Available(c); !slices.Equal(got, want) {
			t.Errorf("Usable(%s) = %v, want %v", c, got, want)
		}
	}
	var want []kernels.Cipher
	for _, c := range kernels.Ciphers() {
		if len(kernels.Available(c)) > 0 {
			want = append(want, c)
		}
	}
	if got := r.Ciphers(); !slices.Equal(got, want) {
		t.Errorf("Ciphers() = %v, want %v", got, want)
	}
	for _, res := range r.Results {
		if res.Injected || res.Duration <= 0 {
			t.Errorf("%s on %q: injected %v, duration %v", res.KAT, res.Impl, res.Injected, res.Duration)
		}
	}
}

func TestEveryKATRegistered(t *testing.T) {
	want := []string{
		"AES-128-GCM/gcm-spec-tc1",
		"AES-128-GCM/gcm-spec-tc2",
		"AES-128-GCM/gcm-spec-tc3",
		"AES-128-GCM/gcm-spec-tc4",
		"AES-256-GCM/gcm-spec-tc13",
		"AES-256-GCM/gcm-spec-tc14",
		"AES-256-GCM/gcm-spec-tc15",
		"AES-256-GCM/gcm-spec-tc16",
		"AES-128-CTR/sp800-38a-f.5.1",
		"AES-256-CTR/sp800-38a-f.5.5",
		"ChaCha20/rfc8439-2.4.2",
		"ChaCha20/rfc8439-a.2-tv1",
		"ChaCha20/rfc8439-a.2-tv2",
		"ChaCha20/rfc8439-a.2-tv3",
		"ChaCha20-Poly1305/rfc8439-2.8.2",
		"ChaCha20-Poly1305/rfc8439-a.5",
		"XChaCha20-Poly1305/draft-irtf-cfrg-xchacha-a.3.1",
		"AES-128-CBC/sp800-38a-f.2.1",
		"AES-256-CBC/sp800-38a-f.2.5",
		"AES-256-IGE/fips197-c.3",
		"AES-256-IGE/sp800-38a-f.1.5",
		"AES-256-GCM/cipherd-format-worked-example-direct",
		"AES-128-GCM/cipherd-format-worked-example-envelope",
		"ChaCha20-Poly1305/cipherd-format-valid-direct",
		"Poly1305/rfc8439-2.5.2",
		"HKDF-SHA-256/rfc5869-tc1",
		"HKDF-SHA-256/rfc5869-tc3",
		"HKDF-SHA-512/wycheproof-tc70",
		"HKDF-SHA-512/cipherd-format-expand",
	}
	kats := KATs()
	var got []string
	seen := make(map[string]bool)
	covered := make(map[kernels.Cipher]bool)
	for _, k := range kats {
		got = append(got, k.Name)
		if seen[k.Name] {
			t.Errorf("duplicate KAT name %q", k.Name)
		}
		seen[k.Name] = true
		if k.Cipher != 0 {
			covered[k.Cipher] = true
			if !k.Cipher.Valid() {
				t.Errorf("%s: invalid cipher %d", k.Name, k.Cipher)
			}
			if !strings.HasPrefix(k.Name, k.Cipher.DisplayName()+"/") {
				t.Errorf("%s: name does not start with %q", k.Name, k.Cipher.DisplayName()+"/")
			}
			if k.check == nil || k.checkPrim != nil || k.Fatal || len(k.Disables) > 0 {
				t.Errorf("%s: a cipher KAT must set check only", k.Name)
			}
		} else if k.checkPrim == nil || k.check != nil {
			t.Errorf("%s: a primitive KAT must set checkPrim only", k.Name)
		}
		for _, c := range k.Disables {
			if !c.Valid() {
				t.Errorf("%s: disables invalid cipher %d", k.Name, c)
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("KATs() names:\n got %q\nwant %q", got, want)
	}
	for _, c := range kernels.Ciphers() {
		if !covered[c] {
			t.Errorf("cipher %s has no KAT", c)
		}
	}

	// KATs returns copies: changing one must not change the registry.
	poly := slices.IndexFunc(kats, func(k KAT) bool { return k.Name == "Poly1305/rfc8439-2.5.2" })
	if poly < 0 {
		t.Fatal("no Poly1305 KAT")
	}
	kats[0].Name = "changed"
	kats[poly].Disables[0] = 0
	again := KATs()
	if again[0].Name != want[0] || !slices.Equal(again[poly].Disables, []kernels.Cipher{kernels.ChaCha20Poly1305, kernels.XChaCha20Poly1305}) {
		t.Errorf("KATs() shares its slices with the caller")
	}
}

// katCheckInjected verifies that every injected result failed through the
// comparison and every other result passed.
func katCheckInjected(t *testing.T, r *KATReport) {
	t.Helper()
	injected := 0
	for _, res := range r.Results {
		switch {
		case res.Injected:
			injected++
			if !errors.Is(res.Err, errKATMismatch) {
				t.Errorf("%s on %q: injected fault reported as %v, want a known-answer mismatch", res.KAT, res.Impl, res.Err)
			}
		case !res.Passed():
			t.Errorf("%s on %q failed without injection: %v", res.KAT, res.Impl, res.Err)
		}
	}
	if injected == 0 {
		t.Errorf("nothing was injected")
	}
}

func TestKATFailOneKAT(t *testing.T) {
	const name = "AES-128-GCM/gcm-spec-tc4"
	r := RunKATs(KATConfig{Fail: name})
	katCheckInjected(t, r)
	failures := r.Failures()
	if len(failures) != len(kernels.Available(kernels.AES128GCM)) {
		t.Fatalf("%d failures, want one per AES-128-GCM implementation", len(failures))
	}
	for _, res := range failures {
		if res.KAT != name || res.Cipher != kernels.AES128GCM || res.CipherName != "aes-128-gcm" || res.Error == "" {
			t.Errorf("unexpected failure %+v", res)
		}
	}
	for _, im := range kernels.Available(kernels.AES128GCM) {
		if r.Passed(im) {
			t.Errorf("Passed(%s) after its KAT failed", im)
		}
	}
	if u := r.Usable(kernels.AES128GCM); len(u) != 0 {
		t.Errorf("Usable(aes-128-gcm) = %v", u)
	}
	if slices.Contains(r.Ciphers(), kernels.AES128GCM) {
		t.Errorf("Ciphers() still lists aes-128-gcm")
	}
	if !slices.Contains(r.Ciphers(), kernels.AES256GCM) {
		t.Errorf("Ciphers() lost aes-256-gcm")
	}
	if err := r.Err(); err != nil {
		t.Errorf("Err() = %v; the other ciphers still pass", err)
	}
}

func TestKATFailOneImplementation(t *testing.T) {
	im, err := kernels.Lookup(kernels.AES128GCM, "stdlib")
	if err != nil {
		t.Fatal(err)
	}
	r := RunKATs(KATConfig{Fail: "AES-128-GCM/STDLIB"}) // names match without regard to case
	katCheckInjected(t, r)
	n := 0
	for _, res := range r.Failures() {
		if res.Cipher != kernels.AES128GCM || res.Impl != "stdlib" {
			t.Errorf("unexpected failure %s on %s/%s", res.KAT, res.CipherName, res.Impl)
		}
		n++
	}
	if want := 5; n != want { // the four GCM specification cases and the format's worked example
		t.Errorf("%d failures, want every AES-128-GCM KAT (%d)", n, want)
	}
	if r.Passed(im) {
		t.Errorf("Passed(%s) after injection", im)
	}
	usable := r.Usable(kernels.AES128GCM)
	if slices.Contains(usable, im) {
		t.Errorf("Usable(aes-128-gcm) includes %s", im)
	}
	var others []*kernels.Implementation
	for _, o := range kernels.Available(kernels.AES128GCM) {
		if o != im {
			others = append(others, o)
		}
	}
	if !slices.Equal(usable, others) {
		t.Errorf("Usable(aes-128-gcm) = %v, want %v", usable, others)
	}
	if got := slices.Contains(r.Ciphers(), kernels.AES128GCM); got != (len(others) > 0) {
		t.Errorf("aes-128-gcm in Ciphers() = %v with %d other implementations", got, len(others))
	}
	if err := r.Err(); err != nil {
		t.Errorf("Err() = %v", err)
	}
}

func TestKATFailCipherName(t *testing.T) {
	// "chacha20" names the stream cipher only, not chacha20-poly1305.
	r := RunKATs(KATConfig{Fail: " chacha20 "})
	katCheckInjected(t, r)
	for _, res := range r.Failures() {
		if res.Cipher != kernels.ChaCha20 {
			t.Errorf("unexpected failure %s", res.KAT)
		}
	}
	if got, want := len(r.Failures()), 4*len(kernels.Available(kernels.ChaCha20)); got != want {
		t.Errorf("%d failures, want %d", got, want)
	}
	cs := r.Ciphers()
	if slices.Contains(cs, kernels.ChaCha20) || !slices.Contains(cs, kernels.ChaCha20Poly1305) {
		t.Errorf("Ciphers() = %v", cs)
	}
}

func TestKATFailPoly1305(t *testing.T) {
	r := RunKATs(KATConfig{Fail: "Poly1305/rfc8439-2.5.2"})
	katCheckInjected(t, r)
	if len(r.Failures()) != 1 || r.Failures()[0].Impl != "" {
		t.Fatalf("failures %+v, want the Poly1305 KAT alone", r.Failures())
	}
	for _, c := range []kernels.Cipher{kernels.ChaCha20Poly1305, kernels.XChaCha20Poly1305} {
		for _, im := range kernels.Available(c) {
			if r.Passed(im) {
				t.Errorf("Passed(%s) with Poly1305 failing", im)
			}
		}
		if len(r.Usable(c)) != 0 || slices.Contains(r.Ciphers(), c) {
			t.Errorf("%s still usable with Poly1305 failing", c)
		}
	}
	if !slices.Contains(r.Ciphers(), kernels.ChaCha20) || !slices.Contains(r.Ciphers(), kernels.AES256GCM) {
		t.Errorf("Ciphers() = %v lost ciphers that do not use Poly1305", r.Ciphers())
	}
	if err := r.Err(); err != nil {
		t.Errorf("Err() = %v; Poly1305 is not fatal", err)
	}
}

func TestKATFailHKDF(t *testing.T) {
	for _, name := range []string{"HKDF-SHA-256/rfc5869-tc1", "HKDF-SHA-256/rfc5869-tc3", "HKDF-SHA-512/wycheproof-tc70", "HKDF-SHA-512/cipherd-format-expand"} {
		t.Run(name, func(t *testing.T) {
			r := RunKATs(KATConfig{Fail: name})
			katCheckInjected(t, r)
			err := r.Err()
			if !errors.Is(err, ErrSelfTest) || !strings.Contains(err.Error(), name) {
				t.Errorf("Err() = %v, want ErrSelfTest naming %s", err, name)
			}
			if len(r.Ciphers()) != len(kernels.Ciphers()) {
				t.Errorf("Ciphers() = %v; HKDF disables no cipher", r.Ciphers())
			}
		})
	}
}

func TestKATFailEverything(t *testing.T) {
	r := RunKATs(KATConfig{Fail: "*"})
	katCheckInjected(t, r)
	if len(r.Failures()) != len(r.Results) || len(r.Results) != katExpectedRuns() {
		t.Errorf("%d of %d results failed, want all %d", len(r.Failures()), len(r.Results), katExpectedRuns())
	}
	if !errors.Is(r.Err(), ErrSelfTest) {
		t.Errorf("Err() = %v", r.Err())
	}
	if cs := r.Ciphers(); len(cs) != 0 {
		t.Errorf("Ciphers() = %v, want none", cs)
	}
	for _, c := range kernels.Ciphers() {
		for _, im := range kernels.Implementations(c) {
			if r.Passed(im) {
				t.Errorf("Passed(%s)", im)
			}
		}
	}
}

func TestKATFailFromEnvironment(t *testing.T) {
	t.Setenv(katFailEnv, "aes-256-ctr")
	r := RunKATs(KATConfig{})
	katCheckInjected(t, r)
	if slices.Contains(r.Ciphers(), kernels.AES256CTR) {
		t.Errorf("%s=aes-256-ctr ignored", katFailEnv)
	}
	// KATConfig.Fail takes precedence over the environment.
	r = RunKATs(KATConfig{Fail: "aes-128-ctr"})
	if !slices.Contains(r.Ciphers(), kernels.AES256CTR) || slices.Contains(r.Ciphers(), kernels.AES128CTR) {
		t.Errorf("Ciphers() = %v with Fail=aes-128-ctr over the environment", r.Ciphers())
	}
}

// TestKATFaultUndetected checks the safety net: a check that passes on
// corrupted output is itself reported as a failure.
func TestKATFaultUndetected(t *testing.T) {
	blind := []KAT{
		{Name: "Test/blind", Cipher: kernels.AES128GCM, check: func(katTarget) error { return nil }},
		{Name: "Test/blind-primitive", checkPrim: func(katPrims) error { return nil }},
	}
	r := katRun(KATConfig{Fail: "*"}, blind)
	if len(r.Results) == 0 {
		t.Fatal("no results")
	}
	for _, res := range r.Results {
		if !errors.Is(res.Err, errKATFaultUndetected) || !res.Injected {
			t.Errorf("%s: err %v, injected %v", res.KAT, res.Err, res.Injected)
		}
	}
}

func TestKATPanicIsFailure(t *testing.T) {
	t.Setenv(katFailEnv, "")
	kats := []KAT{
		{Name: "Test/panics", Cipher: kernels.AES128GCM, check: func(t katTarget) error {
			var a []byte
			_ = a[len(t.im.Name())] // index out of range
			return nil
		}},
		{Name: "Test/primitive-panics", Fatal: true, checkPrim: func(katPrims) error { panic("boom") }},
		{Name: "Test/fine", Cipher: kernels.AES256GCM, check: func(katTarget) error { return nil }},
	}
	var r *KATReport
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("katRun panicked: %v", p)
			}
		}()
		r = katRun(KATConfig{}, kats)
	}()
	failed := map[string]string{}
	for _, res := range r.Failures() {
		failed[res.KAT] = res.Error
	}
	if e := failed["Test/panics"]; !strings.Contains(e, "panic") || !strings.Contains(e, "index out of range") {
		t.Errorf("Test/panics recorded as %q", e)
	}
	if e := failed["Test/primitive-panics"]; e != "panic: boom" {
		t.Errorf("Test/primitive-panics recorded as %q", e)
	}
	if _, ok := failed["Test/fine"]; ok || len(failed) != 2 {
		t.Errorf("failures %v", failed)
	}
	for _, im := range kernels.Available(kernels.AES128GCM) {
		if r.Passed(im) {
			t.Errorf("Passed(%s) after a panic", im)
		}
	}
	if !errors.Is(r.Err(), ErrSelfTest) {
		t.Errorf("Err() = %v after a fatal primitive panicked", r.Err())
	}
}

func TestKATWriteText(t *testing.T) {
	var clean bytes.Buffer
	if err := katRunClean(t).WriteText(&clean); err != nil {
		t.Fatal(err)
	}
	out := clean.String()
	t.Logf("report:\n%s", out)
	for _, c := range kernels.Ciphers() {
		for _, im := range kernels.Available(c) {
			if !katHasLine(out, im.String(), "PASS") {
				t.Errorf("no PASS line for %s", im)
			}
		}
	}
	for _, want := range []string{"Poly1305/rfc8439-2.5.2", "HKDF-SHA-512/wycheproof-tc70", "PASS: ", "total time "} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}

	var failed bytes.Buffer
	if err := RunKATs(KATConfig{Fail: "aes-128-gcm/stdlib,Poly1305/rfc8439-2.5.2"}).WriteText(&failed); err != nil {
		t.Fatal(err)
	}
	out = failed.String()
	t.Logf("report with injected failures:\n%s", out)
	if !katHasLine(out, "aes-128-gcm/stdlib", "FAIL") {
		t.Errorf("no FAIL line for aes-128-gcm/stdlib")
	}
	if !katHasLine(out, "FAIL AES-128-GCM/gcm-spec-tc1 on aes-128-gcm/stdlib", "Seal", "[injected]") {
		t.Errorf("failure of AES-128-GCM/gcm-spec-tc1 not listed with its error")
	}
	if !katHasLine(out, "chacha20-poly1305/", "disabled") {
		t.Errorf("chacha20-poly1305 not shown as disabled")
	}
	if !katHasLine(out, "Poly1305/rfc8439-2.5.2", "FAIL") || !katHasLine(out, "aes-256-gcm/", "PASS") {
		t.Errorf("primitive FAIL or other PASS lines missing")
	}
	if !strings.Contains(out, "DEGRADED: ") {
		t.Errorf("summary does not say DEGRADED")
	}
}

// katHasLine reports whether some line of text contains all of words.
func katHasLine(text string, words ...string) bool {
	for line := range strings.Lines(text) {
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(line, w)
		}
		if ok {
			return true
		}
	}
	return false
}

func TestKATLogsFailures(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	RunKATs(KATConfig{Fail: "aes-256-cbc/stdlib,HKDF-SHA-256/rfc5869-tc1,no-such-thing", Logger: zap.New(core)})
	failed := logs.FilterMessage("selftest: known-answer test failed").All()
	if len(failed) != 2 {
		t.Fatalf("%d failure entries, want 2", len(failed))
	}
	impl := failed[0].ContextMap()
	if impl["kat"] != "AES-256-CBC/sp800-38a-f.2.5" || impl["impl"] != "aes-256-cbc/stdlib" || impl["error"] == "" || impl["injected"] != true {
		t.Errorf("implementation failure logged as %v", impl)
	}
	prim := failed[1].ContextMap()
	if prim["kat"] != "HKDF-SHA-256/rfc5869-tc1" || prim["fatal"] != true || prim["error"] == "" {
		t.Errorf("primitive failure logged as %v", prim)
	}
	if logs.FilterField(zap.String("entry", "no-such-thing")).Len() != 1 {
		t.Errorf("unmatched Fail entry not warned about")
	}
	if logs.FilterMessage("selftest: known-answer tests done").Len() != 1 {
		t.Errorf("no summary entry")
	}
}

func TestKATResultJSON(t *testing.T) {
	r := RunKATs(KATConfig{Fail: "AES-256-IGE/fips197-c.3"})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Results []map[string]any `json:"results"`
		Dur     int64            `json:"duration_ns"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != len(r.Results) || back.Dur <= 0 {
		t.Fatalf("JSON %s", b)
	}
	for _, m := range back.Results {
		if m["kat"] == "AES-256-IGE/fips197-c.3" {
			if m["cipher"] != "aes-256-ige" || m["impl"] == "" || m["error"] == "" || m["injected"] != true {
				t.Errorf("failed result encoded as %v", m)
			}
		}
		if m["kat"] == "Poly1305/rfc8439-2.5.2" {
			if _, ok := m["impl"]; ok {
				t.Errorf("primitive result has impl: %v", m)
			}
		}
	}
	// A decoded result with an error string is not a pass.
	var res KATResult
	if err := json.Unmarshal([]byte(`{"kat":"x","error":"boom"}`), &res); err != nil || res.Passed() {
		t.Errorf("decoded failure: Passed() = %v, err %v", res.Passed(), err)
	}
}

// TestKATCTRCounterCarry checks every AES-CTR implementation across counter
// carries the SP 800-38A vectors never reach: out of the low 32 bits, out of
// the low 64 bits, and the wrap of the whole 128-bit counter. The expected
// keystream is computed here block by block with crypto/aes, incrementing the
// counter as a 128-bit big-endian integer. 20 blocks and 7 bytes cover the
// wide paths and a tail.
func TestKATCTRCounterCarry(t *testing.T) {
	ivs := map[string][]byte{
		"low32":  katHex("f0f1f2f3 f4f5f6f7 f8f9fafb fffffffd"),
		"low64":  katHex("f0f1f2f3 f4f5f6f7 ffffffff fffffffd"),
		"all128": katHex("ffffffff ffffffff ffffffff fffffffd"),
	}
	const n = 20*16 + 7
	for _, c := range []kernels.Cipher{kernels.AES128CTR, kernels.AES256CTR} {
		key := katSP80038AKey128
		if c == kernels.AES256CTR {
			key = katSP80038AKey256
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			t.Fatal(err)
		}
		for name, iv := range ivs {
			want := make([]byte, 0, n+16)
			ctr := [16]byte(iv)
			for len(want) < n {
				var ks [16]byte
				block.Encrypt(ks[:], ctr[:])
				want = append(want, ks[:]...)
				for i := 15; i >= 0; i-- {
					ctr[i]++
					if ctr[i] != 0 {
						break
					}
				}
			}
			want = want[:n]
			for _, im := range kernels.Available(c) {
				s, err := im.NewStream(key, iv)
				if err != nil {
					t.Fatal(err)
				}
				got := make([]byte, n)
				s.XORKeyStream(got, got)
				if !bytes.Equal(got, want) {
					t.Errorf("%s, counter %s: keystream differs", im, name)
				}
				s, _ = im.NewStream(key, iv)
				got = make([]byte, n)
				for rest := got; len(rest) > 0; {
					k := min(len(rest), 37)
					s.XORKeyStream(rest[:k], rest[:k])
					rest = rest[k:]
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s, counter %s, in pieces: keystream differs", im, name)
				}
			}
		}
	}
}

// TestKATIGEDerivation recomputes the AES-256-IGE vectors from the published
// AES-256 known answers they are built on, and checks those answers with
// crypto/aes.
func TestKATIGEDerivation(t *testing.T) {
	xor := func(a, b []byte) []byte {
		out := make([]byte, len(a))
		for i := range a {
			out[i] = a[i] ^ b[i]
		}
		return out
	}
	derive := func(key, iv []byte, x, y [][]byte) katBlockVector {
		block, err := aes.NewCipher(key)
		if err != nil {
			t.Fatal(err)
		}
		v := katBlockVector{key: key, iv: iv}
		c, p := iv[:16], iv[16:]
		for i := range x {
			got := make([]byte, 16)
			block.Encrypt(got, x[i])
			if !bytes.Equal(got, y[i]) {
				t.Fatalf("AES-256 known answer %d does not hold", i)
			}
			pi, ci := xor(x[i], c), xor(y[i], p)
			v.plaintext = append(v.plaintext, pi...)
			v.ciphertext = append(v.ciphertext, ci...)
			c, p = ci, pi
		}
		return v
	}
	check := func(name string, got, want katBlockVector) {
		if !bytes.Equal(got.key, want.key) || !bytes.Equal(got.iv, want.iv) ||
			!bytes.Equal(got.plaintext, want.plaintext) || !bytes.Equal(got.ciphertext, want.ciphertext) {
			t.Errorf("%s: the literal vector does not follow from the known answers", name)
		}
	}

	// FIPS 197 Appendix C.3.
	fips := derive(katIGEFIPS197.key, katIGEFIPS197.iv,
		[][]byte{katHex("00112233445566778899aabbccddeeff")},
		[][]byte{katHex("8ea2b7ca516745bfeafc49904b496089")})
	check("fips197-c.3", fips, katIGEFIPS197)

	// NIST SP 800-38A F.1.5, ECB-AES256.Encrypt.
	var x, y [][]byte
	ecb := katHex("f3eed1bdb5d2a03c064b5a7e3db181f8", "591ccb10d410ed26dc5ba74a31362870",
		"b6ed21b99ca6f4f9f153e7b1beafed1d", "23304b7a39f9f3ff067d8d8f9e24ecc7")
	for i := 0; i < 64; i += 16 {
		x = append(x, katSP80038APlain[i:i+16])
		y = append(y, ecb[i:i+16])
	}
	sp := derive(katIGESP80038A.key, katIGESP80038A.iv, x, y)
	check("sp800-38a-f.1.5", sp, katIGESP80038A)
}

// TestKATCompare pins the error the comparisons return: it names the offset,
// never the bytes.
func TestKATCompare(t *testing.T) {
	if err := katCompare("x", []byte{1, 2}, []byte{1, 2}); err != nil {
		t.Error(err)
	}
	err := katCompare("Seal", []byte{1, 2, 0xab}, []byte{1, 2, 0xcd})
	if !errors.Is(err, errKATMismatch) || err.Error() != "Seal: output differs from the known answer at byte 2 of 3" {
		t.Errorf("err = %v", err)
	}
	if err := katCompare("Open", []byte{1}, []byte{1, 2}); !errors.Is(err, errKATMismatch) {
		t.Errorf("length mismatch: err = %v", err)
	}
}

// katForgivingAEAD is a broken AEAD whose Open accepts any input.
type katForgivingAEAD struct{ cipher.AEAD }

func (a katForgivingAEAD) Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error) {
	out, err := a.AEAD.Open(dst, nonce, ciphertext, additionalData)
	if err != nil {
		return append(dst, make([]byte, len(ciphertext)-a.Overhead())...), nil
	}
	return out, nil
}

// TestKATAEADRejectsForgery checks that the AEAD check catches an Open that
// does not authenticate, which no output comparison would.
func TestKATAEADRejectsForgery(t *testing.T) {
	block, err := aes.NewCipher(make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	v := katAEADVector{key: make([]byte, 16), nonce: make([]byte, 12), plaintext: []byte("attack at dawn"), aad: []byte("hdr")}
	sealed := gcm.Seal(nil, v.nonce, v.plaintext, v.aad)
	v.ciphertext, v.tag = sealed[:len(v.plaintext)], sealed[len(v.plaintext):]
	if err := v.checkAEAD(gcm); err != nil {
		t.Fatalf("honest AEAD: %v", err)
	}
	err = v.checkAEAD(katForgivingAEAD{gcm})
	if err == nil || !strings.Contains(err.Error(), "Open accepted") {
		t.Errorf("forgiving AEAD: err = %v", err)
	}
}
