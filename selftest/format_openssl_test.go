package selftest

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/kernels"
)

// The text and -mr outputs must be openssl's own layout, byte for byte but
// for the figures and the build details: checked against the host openssl
// running the same command (its standard output), with the numbers masked.

var (
	// A figure in a table row: right-aligned in 12 columns, "k" or space after.
	tableFigure = regexp.MustCompile(` +[0-9]+\.[0-9]{2}[k ]`)
	// A figure in a -mr line.
	mrFigure = regexp.MustCompile(`:[0-9]+\.[0-9]{2}`)
	// The lines about the build, whose content differs by design.
	buildLine = regexp.MustCompile(`^(version|built on|options|compiler|CPUINFO): `)
)

// maskLayout keeps what must match openssl: the order and kind of lines,
// fixed texts, names and the width of every column.
func maskLayout(out string) []string {
	var lines []string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if m := buildLine.FindString(line); m != "" {
			line = m + "…"
		}
		line = tableFigure.ReplaceAllStringFunc(line, func(f string) string { return strings.Repeat("#", len(f)) })
		line = mrFigure.ReplaceAllString(line, ":N")
		lines = append(lines, line)
	}
	return lines
}

func TestOutputLayoutMatchesOpenSSL(t *testing.T) {
	requireOpenSSL(t)
	if testing.Short() {
		t.Skip("runs openssl speed for about 8 seconds")
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		args  []string
		sizes []int
		multi int
		mr    bool
	}{
		{"table", []string{"-evp", "aes-128-gcm", "-seconds", "1"}, DefaultSizes, 1, false},
		{"one size", []string{"-evp", "aes-128-gcm", "-seconds", "1", "-bytes", "16"}, []int{16}, 1, false},
		{"multi", []string{"-multi", "2", "-evp", "aes-128-gcm", "-seconds", "1", "-bytes", "64"}, []int{64}, 2, false},
		{"mr", []string{"-mr", "-evp", "aes-128-gcm", "-seconds", "1", "-bytes", "1024"}, []int{1024}, 1, true},
		{"mr multi", []string{"-mr", "-multi", "2", "-evp", "aes-128-gcm", "-seconds", "1", "-bytes", "64"}, []int{64}, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var theirs bytes.Buffer
			cmd := exec.CommandContext(ctx, "openssl", append([]string{"speed"}, tc.args...)...)
			cmd.Stdout = &theirs
			if err := cmd.Run(); err != nil {
				t.Fatalf("openssl speed %s: %v", strings.Join(tc.args, " "), err)
			}
			res, err := Speed(ctx, SpeedConfig{Ciphers: []kernels.Cipher{kernels.AES128GCM}, Sizes: tc.sizes,
				Duration: time.Millisecond, Multi: tc.multi})
			if err != nil {
				t.Fatal(err)
			}
			var ours bytes.Buffer
			if tc.mr {
				err = res.WriteMR(&ours)
			} else {
				err = res.WriteTable(&ours)
			}
			if err != nil {
				t.Fatal(err)
			}
			want, got := maskLayout(theirs.String()), maskLayout(ours.String())
			if !slices.Equal(got, want) {
				t.Errorf("layout differs from openssl speed %s\nopenssl:\n%s\ncipherd:\n%s\nmasked openssl:\n%s\nmasked cipherd:\n%s",
					strings.Join(tc.args, " "), theirs.String(), ours.String(), strings.Join(want, "\n"), strings.Join(got, "\n"))
			}
		})
	}
}

// The -multi form carries every worker's own figures, which sum to the row.
func TestWriteTableMultiWorkers(t *testing.T) {
	res, err := Speed(context.Background(), SpeedConfig{Ciphers: []kernels.Cipher{kernels.ChaCha20}, Sizes: []int{64},
		Duration: 5 * time.Millisecond, Multi: 3})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Rows[0].Cells[0]
	var sum int64
	for _, n := range c.WorkerOps {
		sum += n
	}
	if len(c.WorkerOps) != 3 || sum != c.Ops {
		t.Fatalf("worker ops %v, total %d", c.WorkerOps, c.Ops)
	}
	var b bytes.Buffer
	if err := res.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Forked child 2\n", "Got: +H:64 from 2\n", "Got: +F:25:ChaCha20:"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("-multi table lacks %q:\n%s", want, b.String())
		}
	}
}
