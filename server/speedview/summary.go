package speedview

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cipherd/cipherd/kernels"
	"github.com/cipherd/cipherd/selftest"
)

// summary is the answer a reader of /speed looks for first: the AEAD
// the service seals new data with, the implementation it runs, how fast
// that is at 1 KiB and 16 KiB with the range of the trials behind each
// figure, how that compares with Go's own implementation of the AEAD, and
// why this AEAD. The figures are the table's (the latest full run) when it
// has them, else the selection's quick profile: one source for both, so
// that the summary and the table below it agree.
type summary struct {
	AEAD   string        `json:"aead"`
	Impl   string        `json:"impl"`
	Cells  []summaryCell `json:"cells"`
	Source string        `json:"source"` // "table" or "profile"
	// GoImpl is Go's own implementation of the AEAD (the standard
	// library's, or golang.org/x/crypto's for ChaCha20-Poly1305), and
	// VsGo the service's figure at 16 KiB over it, from the same source;
	// absent when either was not measured or they are the same.
	GoImpl string  `json:"go_impl,omitempty"`
	VsGo   float64 `json:"vs_go,omitempty"`
	// OpenSSL is the host's OpenSSL measuring the same AEAD (its version
	// and figures at the summary's sizes), and VsOpenSSL the service's
	// figure at 16 KiB over OpenSSL's; absent when no comparison was run.
	OpenSSL   *summaryOpenSSL `json:"openssl,omitempty"`
	VsOpenSSL float64         `json:"vs_openssl,omitempty"`
	Reason    string          `json:"reason"`
}

// summaryOpenSSL is OpenSSL's side of the comparison.
type summaryOpenSSL struct {
	Version string        `json:"version"`
	Cells   []summaryCell `json:"cells"`
}

// summaryCell is one figure of the summary: bytes per second at Size, the
// median of its trials, and their range (equal to it when one trial was
// run).
type summaryCell struct {
	Size int     `json:"size"`
	Rate float64 `json:"bytes_per_second"`
	Min  float64 `json:"min_bytes_per_second"`
	Max  float64 `json:"max_bytes_per_second"`
}

// summarySizes are the message sizes of the summary: a small message and
// the bulk one openssl speed's users compare hosts by.
var summarySizes = []int{1024, 16384}

// SummarySizes returns the message sizes the summary and the fleet view
// show, for whoever measures figures for them (compare_openssl).
func SummarySizes() []int { return slices.Clone(summarySizes) }

// goImplementations names Go's own implementation of each AEAD.
var goImplementations = map[kernels.Cipher]string{
	kernels.AES128GCM:         "stdlib",
	kernels.AES256GCM:         "stdlib",
	kernels.ChaCha20Poly1305:  "xcrypto",
	kernels.XChaCha20Poly1305: "xcrypto",
}

// summarize returns the summary of sel against the table res (nil: none
// yet), or nil when sel names no AEAD implementation.
func summarize(sel *selftest.Selection, res *selftest.SpeedResult, ossl *OpenSSL) *summary {
	im := sel.Implementation(sel.AEAD)
	if im == nil {
		return nil
	}
	sum := &summary{AEAD: sel.AEAD.String(), Impl: im.Name(), Reason: strings.TrimSuffix(sel.AEADReason, "."), Cells: []summaryCell{}}
	find := profileCells(sel)
	sum.Source = "profile"
	if res != nil && tableHas(res, sel.AEAD, im.Name()) {
		find, sum.Source = tableCells(res), "table"
	}
	for _, size := range summarySizes {
		if c, ok := find(sel.AEAD, im.Name(), size); ok {
			sum.Cells = append(sum.Cells, c)
		}
	}
	if g := goImplementations[sel.AEAD]; g != "" && g != im.Name() {
		ours, ok1 := find(sel.AEAD, im.Name(), 16384)
		theirs, ok2 := find(sel.AEAD, g, 16384)
		if ok1 && ok2 && theirs.Rate > 0 {
			sum.GoImpl, sum.VsGo = g, ours.Rate/theirs.Rate
		}
	}
	if ossl != nil && ossl.Row != nil && ossl.Row.Cipher == sel.AEAD {
		so := &summaryOpenSSL{Version: ossl.Program.Version, Cells: []summaryCell{}}
		for _, size := range summarySizes {
			for _, c := range ossl.Row.Cells {
				if r := c.BytesPerSecond(); c.Size == size && r > 0 {
					so.Cells = append(so.Cells, summaryCell{Size: size, Rate: r, Min: r, Max: r})
					if ours, ok := find(sel.AEAD, im.Name(), size); ok && size == 16384 {
						sum.VsOpenSSL = ours.Rate / r
					}
				}
			}
		}
		sum.OpenSSL = so
	}
	return sum
}

// cellFinder returns the figure of implementation impl of c at size, and
// whether its source has one.
type cellFinder func(c kernels.Cipher, impl string, size int) (summaryCell, bool)

func tableHas(res *selftest.SpeedResult, c kernels.Cipher, impl string) bool {
	for _, r := range res.Rows {
		if r.Cipher == c && r.Impl == impl {
			return true
		}
	}
	return false
}

// tableCells finds the figures of the table res: a cell's median trial
// with the range of its trials.
func tableCells(res *selftest.SpeedResult) cellFinder {
	return func(c kernels.Cipher, impl string, size int) (summaryCell, bool) {
		for _, r := range res.Rows {
			if r.Cipher != c || r.Impl != impl {
				continue
			}
			for _, cell := range r.Cells {
				if cell.Size == size && cell.Rate > 0 {
					out := summaryCell{Size: size, Rate: cell.Rate, Min: cell.Min, Max: cell.Max}
					if len(cell.Trials) < 2 {
						out.Min, out.Max = cell.Rate, cell.Rate
					}
					return out, true
				}
			}
		}
		return summaryCell{}, false
	}
}

// profileCells finds the figures of sel's quick profile: a cell's median
// trial with the range of its trials.
func profileCells(sel *selftest.Selection) cellFinder {
	return func(c kernels.Cipher, impl string, size int) (summaryCell, bool) {
		for _, p := range sel.Profile {
			if p.Cipher == c.String() && p.Impl == impl && p.Size == size && p.BytesPerSecond > 0 {
				out := summaryCell{Size: size, Rate: p.BytesPerSecond, Min: p.Min, Max: p.Max}
				if out.Min == 0 || out.Max == 0 {
					out.Min, out.Max = out.Rate, out.Rate
				}
				return out, true
			}
		}
		return summaryCell{}, false
	}
}

// sentence is the summary in words, for the page.
func (sum *summary) sentence() string {
	var b strings.Builder
	fmt.Fprintf(&b, "This host seals new data with %s (%s)", strings.ToUpper(sum.AEAD), sum.Impl)
	for i, c := range sum.Cells {
		sep := ": "
		if i > 0 {
			sep = ", "
		}
		fmt.Fprintf(&b, "%s%s MB/s at %s (trials %s–%s)", sep, formatMBps(c.Rate), sizeLabel(c.Size), formatMBps(c.Min), formatMBps(c.Max))
	}
	b.WriteString(".")
	switch {
	case sum.VsGo > 0 && sum.VsOpenSSL > 0:
		fmt.Fprintf(&b, " At 16 KiB that is %.2f× Go's own implementation (%s) and %.2f× the host's OpenSSL (%s) on this host.", sum.VsGo, sum.GoImpl, sum.VsOpenSSL, sum.OpenSSL.Version)
	case sum.VsGo > 0:
		fmt.Fprintf(&b, " At 16 KiB that is %.2f× Go's own implementation (%s) on this host.", sum.VsGo, sum.GoImpl)
	case sum.VsOpenSSL > 0:
		fmt.Fprintf(&b, " At 16 KiB that is %.2f× the host's OpenSSL (%s).", sum.VsOpenSSL, sum.OpenSSL.Version)
	}
	return b.String()
}
