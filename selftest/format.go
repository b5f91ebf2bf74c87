package selftest

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/cipherd/cipherd/internal/buildinfo"
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

// WriteTable writes the result as `openssl speed` prints it: a few lines about
// the build and CPU, then the table in 1000s of bytes per second.
func (r *SpeedResult) WriteTable(w io.Writer) error {
	bw := bufio.NewWriter(w)
	b := buildinfo.Get()
	fmt.Fprintf(bw, "version: cipherd %s\n", b.Version)
	if b.Time != "" {
		fmt.Fprintf(bw, "built on: %s\n", b.Time)
	}
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
	fmt.Fprintf(bw, "options: %s\n", strings.Join(opts, " "))
	fmt.Fprintf(bw, "compiler: gc %s %s\n", b.GoVersion, b.Platform)
	fmt.Fprintf(bw, "CPUINFO: %s\n", r.Host.cpuLine())
	fmt.Fprintln(bw, "The 'numbers' are in 1000s of bytes per second processed.")
	writeTableHeader(bw, r.Sizes)
	for _, row := range r.Rows {
		writeTableRow(bw, r.rowName(row), row.Cells, r.nameWidth())
	}
	return bw.Flush()
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
// sizes and a "+F:" line per row with bytes per second.
func (r *SpeedResult) WriteMR(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprint(bw, "+H")
	for _, n := range r.Sizes {
		fmt.Fprintf(bw, ":%d", n)
	}
	fmt.Fprintln(bw)
	for _, row := range r.Rows {
		fmt.Fprintf(bw, "+F:%d:%s", openSSLEVPIndex, r.rowName(row))
		for _, c := range row.Cells {
			fmt.Fprintf(bw, ":%.2f", c.BytesPerSecond())
		}
		fmt.Fprintln(bw)
	}
	return bw.Flush()
}

// WriteComparison writes ours beside OpenSSL's figures for the same ciphers
// and sizes, with the ratio ours ÷ OpenSSL under each cipher. A cipher that
// this OpenSSL does not support is said so.
func WriteComparison(w io.Writer, ours, theirs *SpeedResult) error {
	bw := bufio.NewWriter(w)
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
	return bw.Flush()
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
