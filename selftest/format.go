package selftest

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/cipherd/cipherd/internal/buildinfo"
	"github.com/cipherd/cipherd/kernels"
)

// openSSLEVPIndex is the algorithm index `openssl speed -mr` prints in "+F:"
// lines for ciphers chosen with -evp (D_EVP in OpenSSL 3.0's apps/speed.c).
const openSSLEVPIndex = 25

// rowName is the name printed for a row: openssl's display name, with the
// implementation appended when several implementations of a cipher are shown.
func (r *SpeedResult) rowName(row SpeedRow) string {
	if r.multiImp {
		return row.Name + "/" + row.Impl
	}
	return row.Name
}

// builtOnUnknown is what openssl prints on its "built on:" line when the
// build carries no date, as a Go build without VCS information does.
const builtOnUnknown = "reproducible build, date unspecified"

// WriteTable writes the result as `openssl speed` prints it: a few lines about
// the build and CPU, then the table in 1000s of bytes per second. With
// Multi > 1 it is openssl's -multi form: a "Forked child" line per worker
// and each worker's figures as openssl relays its children's ("Got: +H:…
// from N", "Got: +F:… from N"), then the build lines and the summed rows,
// without the header lines, as openssl 3 prints them. (The workers are
// goroutines sharing one start and one clock, not processes.)
func (r *SpeedResult) WriteTable(w io.Writer) error {
	bw := bufio.NewWriter(w)
	if r.Multi > 1 {
		r.writeWorkers(bw)
	}
	b := buildinfo.Get()
	fmt.Fprintf(bw, "version: cipherd %s\n", b.Version)
	builtOn := b.Time
	if builtOn == "" {
		builtOn = builtOnUnknown
	}
	fmt.Fprintf(bw, "built on: %s\n", builtOn)
	opts := []string{"GOMAXPROCS=" + fmt.Sprint(r.Host.GOMAXPROCS)}
	if b.GOAMD64 != "" {
		opts = append(opts, "GOAMD64="+b.GOAMD64)
	}
	if b.Tags != "" {
		opts = append(opts, "tags="+b.Tags)
	}
	if r.Multi > 1 {
		opts = append(opts, fmt.Sprintf("multi=%d", r.Multi))
	}
	if r.Trials > 1 {
		opts = append(opts, fmt.Sprintf("median-of=%d", r.Trials))
	}
	fmt.Fprintf(bw, "options: %s\n", strings.Join(opts, " "))
	fmt.Fprintf(bw, "compiler: gc %s %s\n", b.GoVersion, b.Platform)
	fmt.Fprintf(bw, "CPUINFO: %s\n", r.Host.cpuLine())
	if r.Multi <= 1 {
		fmt.Fprintln(bw, "The 'numbers' are in 1000s of bytes per second processed.")
		writeTableHeader(bw, r.Sizes)
	}
	for _, row := range r.Rows {
		writeTableRow(bw, r.rowName(row), row.Cells, r.nameWidth())
	}
	return bw.Flush()
}

// writeWorkers writes openssl -multi's lines about its children: one
// "Forked child N" per worker, then each worker's "+H" and "+F" lines
// relayed as "Got: … from N".
func (r *SpeedResult) writeWorkers(w io.Writer) {
	for i := range r.Multi {
		fmt.Fprintf(w, "Forked child %d\n", i)
	}
	for i := range r.Multi {
		fmt.Fprint(w, "Got: ")
		writeMRHeader(w, r.Sizes, fmt.Sprintf(" from %d", i))
		for _, row := range r.Rows {
			rates := make([]float64, len(row.Cells))
			for j, c := range row.Cells {
				rates[j] = c.workerBytesPerSecond(i)
			}
			fmt.Fprint(w, "Got: ")
			writeMRRow(w, r.rowName(row), rates, fmt.Sprintf(" from %d", i))
		}
	}
}

// nameWidth is openssl's 13-character name column, widened to the longest
// name when rows carry implementation names, so the columns stay aligned.
func (r *SpeedResult) nameWidth() int {
	w := 13
	if r.multiImp {
		for _, row := range r.Rows {
			w = max(w, len(r.rowName(row))+1)
		}
	}
	return w
}

// cpuLine summarises the processor in one line.
func (h HostReport) cpuLine() string {
	s := fmt.Sprintf("%s %s family %d model %d stepping %d; %s",
		h.Vendor, h.Brand, h.Family, h.Model, h.Stepping, strings.Join(h.Features, " "))
	if len(h.Disabled) > 0 {
		s += "; off by GODEBUG: " + strings.Join(h.Disabled, " ")
	}
	return s
}

func writeTableHeader(w io.Writer, sizes []int) {
	fmt.Fprint(w, "type        ")
	for _, n := range sizes {
		fmt.Fprintf(w, "%7d bytes", n)
	}
	fmt.Fprintln(w)
}

func writeTableRow(w io.Writer, name string, cells []SpeedCell, width int) {
	fmt.Fprintf(w, "%-*s", width, name)
	for _, c := range cells {
		fmt.Fprint(w, formatRate(c.BytesPerSecond()))
	}
	fmt.Fprintln(w)
}

// formatRate formats bytes per second as openssl does: in thousands with a
// "k" suffix above 10000, else in bytes with a trailing space.
func formatRate(bps float64) string {
	if bps > 10000 {
		return fmt.Sprintf(" %11.2fk", bps/1e3)
	}
	return fmt.Sprintf(" %11.2f ", bps)
}

// WriteMR writes the result in `openssl speed -mr` form: a "+H:" line with the
// sizes and a "+F:" line per row with bytes per second. With Multi > 1 it is
// openssl's -mr -multi form: the workers' lines (see WriteTable), then the
// summed "+F:" lines without a "+H:" line of the parent's own.
func (r *SpeedResult) WriteMR(w io.Writer) error {
	bw := bufio.NewWriter(w)
	if r.Multi > 1 {
		r.writeWorkers(bw)
	} else {
		writeMRHeader(bw, r.Sizes, "")
	}
	for _, row := range r.Rows {
		rates := make([]float64, len(row.Cells))
		for j, c := range row.Cells {
			rates[j] = c.BytesPerSecond()
		}
		writeMRRow(bw, r.rowName(row), rates, "")
	}
	return bw.Flush()
}

func writeMRHeader(w io.Writer, sizes []int, suffix string) {
	fmt.Fprint(w, "+H")
	for _, n := range sizes {
		fmt.Fprintf(w, ":%d", n)
	}
	fmt.Fprintln(w, suffix)
}

func writeMRRow(w io.Writer, name string, rates []float64, suffix string) {
	fmt.Fprintf(w, "+F:%d:%s", openSSLEVPIndex, name)
	for _, v := range rates {
		fmt.Fprintf(w, ":%.2f", v)
	}
	fmt.Fprintln(w, suffix)
}

// WriteComparison writes ours beside OpenSSL's figures for the same ciphers
// and sizes, with the ratio ours ÷ OpenSSL under each cipher. A cipher that
// this OpenSSL does not support is said so.
func WriteComparison(w io.Writer, ours, theirs *SpeedResult) error {
	bw := bufio.NewWriter(w)
	if p := theirs.Program; p != nil {
		fmt.Fprintf(bw, "openssl: %s (%s), run as: %s speed -elapsed -mr -seconds %g -evp <cipher>",
			p.Path, p.Version, p.Path, theirs.Seconds)
		if theirs.Multi > 1 {
			fmt.Fprintf(bw, " -multi %d", theirs.Multi)
		}
		if theirs.Decrypt {
			fmt.Fprint(bw, " -decrypt")
		}
		if !slices.Equal(theirs.Sizes, DefaultSizes) {
			fmt.Fprint(bw, " -bytes <size>, once per size")
		}
		fmt.Fprintln(bw)
	}
	fmt.Fprintln(bw, "The 'numbers' are in 1000s of bytes per second processed; ratio = cipherd ÷ openssl.")
	writeTableHeader(bw, ours.Sizes)
	width := ours.nameWidth()
	for _, row := range ours.Rows {
		writeTableRow(bw, ours.rowName(row), row.Cells, width)
		ref := theirs.find(row.Name)
		if ref == nil {
			fmt.Fprintf(bw, "%-*s (not supported by this openssl)\n", width, "  openssl")
			continue
		}
		writeTableRow(bw, "  openssl", ref.Cells, width)
		fmt.Fprintf(bw, "%-*s", width, "  ratio")
		for i, c := range row.Cells {
			if i < len(ref.Cells) && ref.Cells[i].BytesPerSecond() > 0 {
				fmt.Fprintf(bw, " %11.2fx", c.BytesPerSecond()/ref.Cells[i].BytesPerSecond())
			} else {
				fmt.Fprintf(bw, " %11s ", "-")
			}
		}
		fmt.Fprintln(bw)
	}
	for _, row := range theirs.Rows {
		if openSSLStreamsAEAD(row.Cipher) {
			fmt.Fprintf(bw, "%s: openssl streams each cell's messages through one context, with no IV or tag per message; cipherd seals each message.\n", row.Name)
		}
	}
	return bw.Flush()
}

// openSSLStreamsAEAD reports whether `openssl speed -evp` measures the AEAD c
// as a stream of updates through one context, without a fresh IV or a tag per
// message: its per-message loop (EVP_Update_loop_aead_enc in apps/speed.c)
// runs for the GCM, CCM, OCB and SIV modes only, even with -aead. Against it,
// the ratio of a ChaCha20-Poly1305 row compares unlike work, which
// WriteComparison says beneath the table.
func openSSLStreamsAEAD(c kernels.Cipher) bool {
	return c == kernels.ChaCha20Poly1305 || c == kernels.XChaCha20Poly1305
}

// find returns the first row for the cipher with openssl display name name.
func (r *SpeedResult) find(name string) *SpeedRow {
	if r == nil {
		return nil
	}
	for i := range r.Rows {
		if strings.EqualFold(r.Rows[i].Name, name) {
			return &r.Rows[i]
		}
	}
	return nil
}
