package selftest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/kernels"
)

// Output captured from `openssl speed -elapsed -mr` (OpenSSL 3.0.19), standard
// output only, the form OpenSSLSpeed parses.
const (
	openSSLMROne = "+H:16384\n+F:25:AES-128-CTR:9235857408.00\n"

	openSSLMRMulti = "Forked child 0\nForked child 1\nGot: +H:64 from 0\n" +
		"Got: +F:25:AES-128-GCM:165318592.00 from 0\nGot: +H:64 from 1\n" +
		"Got: +F:25:AES-128-GCM:184825088.00 from 1\n+F:25:AES-128-GCM:350143680.00\n"
)

func TestParseOpenSSLMR(t *testing.T) {
	sizes, rates, err := parseOpenSSLMR(openSSLMROne)
	if err != nil || !slices.Equal(sizes, []int{16384}) || !slices.Equal(rates, []float64{9235857408}) {
		t.Fatalf("single: %v %v %v", sizes, rates, err)
	}
	// With -multi, the header is relayed from the children and the parent
	// prints the sum; the children's own figures must not be taken.
	sizes, rates, err = parseOpenSSLMR(openSSLMRMulti)
	if err != nil || !slices.Equal(sizes, []int{64}) || !slices.Equal(rates, []float64{350143680}) {
		t.Fatalf("multi: %v %v %v", sizes, rates, err)
	}
	for _, bad := range []string{"", "+H:16\n", "+H:16:64\n+F:25:X:1.00\n", "+H:x\n+F:25:X:1\n", "+H:16\n+F:25:X:y\n"} {
		if _, _, err := parseOpenSSLMR(bad); err == nil {
			t.Errorf("parseOpenSSLMR(%q) succeeded", bad)
		}
	}
}

func requireOpenSSL(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI must install openssl (.ci/run does)")
		}
		t.Skip("no openssl binary")
	}
}

func TestCompareOpenSSL(t *testing.T) {
	requireOpenSSL(t)
	if testing.Short() {
		t.Skip("runs openssl for several seconds")
	}
	cfg := SpeedConfig{
		Ciphers:  []kernels.Cipher{kernels.AES128GCM, kernels.AES256IGE},
		Sizes:    []int{1024},
		Duration: 100 * time.Millisecond,
	}
	ours, theirs, err := CompareOpenSSL(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ours.Rows) != 2 {
		t.Fatalf("ours: %d rows", len(ours.Rows))
	}
	// OpenSSL 3.0 has no AES-IGE through EVP: it must be reported missing, not fail the run.
	if theirs.find("AES-256-IGE") != nil {
		t.Errorf("openssl unexpectedly measured AES-256-IGE")
	}
	ref := theirs.find("AES-128-GCM")
	if ref == nil || len(ref.Cells) != 1 || ref.Cells[0].Size != 1024 || ref.Cells[0].BytesPerSecond() < 1e6 {
		t.Fatalf("openssl AES-128-GCM row: %+v", ref)
	}
	var b strings.Builder
	if err := WriteComparison(&b, ours, theirs); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	bin, _ := exec.LookPath("openssl")
	version, _ := exec.Command(bin, "version").Output()
	if theirs.Program == nil || theirs.Program.Path != bin || theirs.Program.Version != strings.TrimSpace(string(version)) {
		t.Errorf("program %+v, want %s (%s)", theirs.Program, bin, strings.TrimSpace(string(version)))
	}
	for _, want := range []string{"openssl: " + bin + " (" + strings.TrimSpace(string(version)) + "), run as: " + bin + " speed -elapsed -mr -seconds 1 -evp <cipher> -bytes <size>, once per size\n",
		"AES-128-GCM  ", "  openssl    ", "  ratio      ", "x\n", "AES-256-IGE", "(not supported by this openssl)"} {
		if !strings.Contains(out, want) {
			t.Errorf("comparison lacks %q:\n%s", want, out)
		}
	}
}

func TestCompareOpenSSLMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, _, err := CompareOpenSSL(context.Background(), SpeedConfig{Ciphers: []kernels.Cipher{kernels.AES128GCM}, Duration: time.Millisecond})
	if !errors.Is(err, ErrNoOpenSSL) {
		t.Fatalf("err = %v, want ErrNoOpenSSL", err)
	}
}

// A ChaCha20-Poly1305 row's ratio compares a Seal per message with openssl's
// streamed updates: the comparison must say so beneath the table, and only
// for the ciphers openssl streams.
func TestWriteComparisonNotesStreamedAEAD(t *testing.T) {
	row := func(c kernels.Cipher, impl string) SpeedRow {
		return SpeedRow{Cipher: c, Name: c.DisplayName(), Impl: impl,
			Cells: []SpeedCell{{Size: 16, Ops: 1000, Elapsed: time.Second}}}
	}
	const note = "ChaCha20-Poly1305: openssl streams each cell's messages through one context, with no IV or tag per message; cipherd seals each message.\n"
	for _, tc := range []struct {
		ciphers []kernels.Cipher
		want    bool
	}{
		{[]kernels.Cipher{kernels.AES128GCM, kernels.ChaCha20Poly1305}, true},
		{[]kernels.Cipher{kernels.ChaCha20Poly1305}, true},
		{[]kernels.Cipher{kernels.AES128GCM, kernels.AES256GCM, kernels.ChaCha20}, false},
	} {
		ours := &SpeedResult{Sizes: []int{16}}
		theirs := &SpeedResult{Sizes: []int{16}, Seconds: 1, Program: &Program{Path: "/usr/bin/openssl", Version: "OpenSSL 3.5.7"}}
		for _, c := range tc.ciphers {
			ours.Rows = append(ours.Rows, row(c, "fast"))
			theirs.Rows = append(theirs.Rows, row(c, "openssl"))
		}
		var b strings.Builder
		if err := WriteComparison(&b, ours, theirs); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if got := strings.Contains(out, note); got != tc.want {
			t.Errorf("%v: note present %v, want %v:\n%s", tc.ciphers, got, tc.want, out)
		}
		if tc.want && !strings.HasSuffix(out, note) {
			t.Errorf("%v: the note is not beneath the table:\n%s", tc.ciphers, out)
		}
	}
}
