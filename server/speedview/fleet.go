package speedview

import (
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
)

// The fleet view, GET /speed/fleet: a row per live replica of a shared
// keystore, each the report the replica published of its host (NewHost),
// the replicas whose selection differs from most flagged (FleetView.Finish).

// FleetHost is one replica's report, a row of the fleet view.
type FleetHost struct {
	Replica      string   `json:"replica"`
	Hostname     string   `json:"hostname"`
	CPU          string   `json:"cpu"`
	LogicalCores int      `json:"logical_cores"`
	GOMAXPROCS   int      `json:"gomaxprocs"`
	Features     []string `json:"features"`
	Disabled     []string `json:"disabled,omitempty"`
	// AEAD is what the replica seals new data with under keys that do not
	// pin one, and why.
	AEAD       string `json:"aead"`
	AEADReason string `json:"aead_reason"`
	// Implementations are the replica's choices, by cipher.
	Implementations map[string]string `json:"implementations"`
	// Cells are the 1 KiB and 16 KiB figures of the implementations in
	// use, from the speed table when it has them, else from the start-up
	// profile (CellsSource).
	Cells       []FleetCell `json:"cells"`
	CellsSource string      `json:"cells_source"`
	Version     string      `json:"version"`
	Revision    string      `json:"revision,omitempty"`
	Measured    time.Time   `json:"measured"`

	// Set when the view is read, not published.
	AgeSeconds float64 `json:"age_seconds"`
	Self       bool    `json:"self,omitempty"`
	// Differs marks a replica whose selection (AEAD and implementations)
	// differs from that of most replicas.
	Differs bool `json:"differs,omitempty"`
}

// FleetCell is one figure of a replica's report.
type FleetCell struct {
	Cipher string  `json:"cipher"`
	Impl   string  `json:"impl"`
	Size   int     `json:"size"`
	Rate   float64 `json:"bytes_per_second"`
	Min    float64 `json:"min_bytes_per_second"`
	Max    float64 `json:"max_bytes_per_second"`
}

// FleetView is the body of GET /speed/fleet.
type FleetView struct {
	// Shared is false when the keystore is not shared: the view is then
	// this replica alone.
	Shared bool        `json:"shared"`
	Hosts  []FleetHost `json:"hosts"`
	// Mixed is true when the replicas' selections differ; Note says which
	// AEAD each kind of host would choose and what that means for keys.
	Mixed bool   `json:"mixed"`
	Note  string `json:"note"`
	// PinnedKeys counts the keys that pin an AEAD, by AEAD; the others
	// seal new data with the AEAD of the replica that serves the request.
	PinnedKeys   map[string]int `json:"pinned_keys"`
	UnpinnedKeys int            `json:"unpinned_keys"`
	MaxAge       float64        `json:"max_age_seconds"`
	Generated    time.Time      `json:"generated"`
}

// NewHost returns the report of the host in snap, for the replica with
// the id replica on the host called hostname: the figures of the
// implementations in use come from the table when there is one, else from
// the start-up profile.
func NewHost(snap *Snapshot, replica, hostname string) *FleetHost {
	sel := snap.Selection
	h := &FleetHost{
		Replica: replica, Hostname: hostname,
		CPU: snap.Host.Brand, LogicalCores: snap.Host.LogicalCores, GOMAXPROCS: snap.Host.GOMAXPROCS,
		Features: snap.Host.Features, Disabled: snap.Host.Disabled,
		AEAD: sel.AEADName, AEADReason: strings.TrimSuffix(sel.AEADReason, "."),
		Implementations: map[string]string{}, Cells: []FleetCell{},
		Version: snap.Build.Version, Revision: snap.Build.Revision,
		Measured: sel.Measured,
	}
	if h.Features == nil {
		h.Features = []string{}
	}
	find, src := profileCells(sel), "profile"
	if t := snap.Table; t != nil {
		find, src, h.Measured = tableCells(t.Result), "table", t.Result.Started
	}
	h.CellsSource = src
	for _, ch := range sel.Implementations {
		h.Implementations[ch.Name] = ch.Impl
		for _, size := range summarySizes {
			if c, ok := find(ch.Cipher, ch.Impl, size); ok {
				h.Cells = append(h.Cells, FleetCell{Cipher: ch.Name, Impl: ch.Impl, Size: size, Rate: c.Rate, Min: c.Min, Max: c.Max})
			}
		}
	}
	return h
}

// Finish orders the hosts, flags the replicas whose selection differs
// from most and writes the note; Hosts, Shared and the key counts are set.
func (v *FleetView) Finish() {
	slices.SortFunc(v.Hosts, func(a, b FleetHost) int {
		return strings.Compare(a.Hostname+"/"+a.Replica, b.Hostname+"/"+b.Replica)
	})
	v.flagMixed()
	v.Note = v.note()
}

// selectionKey is what must match for two replicas to seal alike: the
// AEAD and every cipher's implementation.
func (h *FleetHost) selectionKey() string {
	names := make([]string, 0, len(h.Implementations))
	for c := range h.Implementations {
		names = append(names, c)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString(h.AEAD)
	for _, c := range names {
		fmt.Fprintf(&b, " %s=%s", c, h.Implementations[c])
	}
	return b.String()
}

// flagMixed marks the replicas whose selection differs from the most
// common one (on a tie, the one of the first replica in the view's order).
func (v *FleetView) flagMixed() {
	count := map[string]int{}
	for i := range v.Hosts {
		count[v.Hosts[i].selectionKey()]++
	}
	common, most := "", 0
	for i := range v.Hosts {
		if k := v.Hosts[i].selectionKey(); count[k] > most {
			common, most = k, count[k]
		}
	}
	for i := range v.Hosts {
		if v.Hosts[i].selectionKey() != common {
			v.Hosts[i].Differs, v.Mixed = true, true
		}
	}
}

// note says, in a sentence or two, whether the fleet seals alike.
func (v *FleetView) note() string {
	if !v.Mixed {
		if len(v.Hosts) == 1 && !v.Shared {
			return "The keystore is not shared: this replica is the whole fleet."
		}
		return fmt.Sprintf("Every replica makes the same selection: %s.", v.Hosts[0].AEAD)
	}
	byAEAD := map[string][]string{}
	var aeads []string
	for _, h := range v.Hosts {
		if _, ok := byAEAD[h.AEAD]; !ok {
			aeads = append(aeads, h.AEAD)
		}
		byAEAD[h.AEAD] = append(byAEAD[h.AEAD], h.Hostname+"/"+h.Replica)
	}
	var b strings.Builder
	b.WriteString("Mixed fleet: the replicas' selections differ.")
	if len(aeads) > 1 {
		for _, a := range aeads {
			fmt.Fprintf(&b, " %s would seal with %s.", strings.Join(byAEAD[a], ", "), a)
		}
		switch v.UnpinnedKeys {
		case 0:
			b.WriteString(" Every key pins its AEAD, so the keys seal alike on every replica.")
		case 1:
			b.WriteString(" 1 key pins no AEAD and seals new data with the AEAD of whichever replica serves the request; pin one (the key's aead setting) for the same AEAD everywhere.")
		default:
			fmt.Fprintf(&b, " %d keys pin no AEAD and seal new data with the AEAD of whichever replica serves the request; pin one (the key's aead setting) for the same AEAD everywhere.", v.UnpinnedKeys)
		}
	} else {
		fmt.Fprintf(&b, " All seal with %s, with different implementations (flagged): same ciphertexts, different speeds.", aeads[0])
	}
	return b.String()
}

// WriteText writes the view as openssl speed writes a table: one row per
// replica and implementation in use, its figures at 1 KiB and 16 KiB in
// 1000s of bytes per second; mr writes openssl's -mr lines, one +F per
// row, with the replica as the row's name.
func (v *FleetView) WriteText(w io.Writer, mr bool) error {
	var b strings.Builder
	if mr {
		fmt.Fprintf(&b, "+H:%s\n", strings.Join(sizeStrings(), ":"))
	} else {
		b.WriteString("The 'numbers' are in 1000s of bytes per second processed.\n")
		fmt.Fprintf(&b, "%-40s %-20s %-24s", "replica", "aead", "type")
		for _, n := range summarySizes {
			fmt.Fprintf(&b, " %12s", fmt.Sprintf("%d bytes", n))
		}
		b.WriteString("\n")
	}
	for i, h := range v.Hosts {
		name := h.Hostname + "/" + h.Replica
		if h.Differs {
			name += " *"
		}
		for _, c := range fleetRows(&h) {
			if mr && c[0].Rate == 0 && c[len(c)-1].Rate == 0 {
				continue
			}
			if mr {
				fmt.Fprintf(&b, "+F:%d:%s/%s/%s", i, c[0].Cipher, c[0].Impl, h.Replica)
			} else {
				fmt.Fprintf(&b, "%-40s %-20s %-24s", name, h.AEAD, c[0].Cipher+"/"+c[0].Impl)
			}
			for _, cell := range c {
				switch {
				case mr:
					fmt.Fprintf(&b, ":%.2f", cell.Rate)
				case cell.Rate == 0:
					fmt.Fprintf(&b, " %12s", "n/a")
				default:
					fmt.Fprintf(&b, " %11.2fk", cell.Rate/1000)
				}
			}
			b.WriteString("\n")
		}
	}
	if !mr {
		fmt.Fprintf(&b, "\n%s\n", v.Note)
		if v.Mixed {
			b.WriteString("* the replica's selection differs from most replicas'\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// sizeStrings are summarySizes as text.
func sizeStrings() []string {
	var out []string
	for _, n := range summarySizes {
		out = append(out, fmt.Sprint(n))
	}
	return out
}

// fleetRows groups a report's cells by implementation, each row holding
// one cell per size of summarySizes (a missing one as zero); a report
// without figures (a replica that skipped its benchmark) is one row of
// its AEAD's implementation, all zero.
func fleetRows(h *FleetHost) [][]FleetCell {
	if len(h.Cells) == 0 {
		row := make([]FleetCell, len(summarySizes))
		for j, n := range summarySizes {
			row[j] = FleetCell{Cipher: h.AEAD, Impl: h.Implementations[h.AEAD], Size: n}
		}
		return [][]FleetCell{row}
	}
	var rows [][]FleetCell
	for _, c := range h.Cells {
		i := slices.IndexFunc(rows, func(r []FleetCell) bool { return r[0].Cipher == c.Cipher && r[0].Impl == c.Impl })
		if i < 0 {
			row := make([]FleetCell, len(summarySizes))
			for j, n := range summarySizes {
				row[j] = FleetCell{Cipher: c.Cipher, Impl: c.Impl, Size: n}
			}
			rows = append(rows, row)
			i = len(rows) - 1
		}
		if j := slices.Index(summarySizes, c.Size); j >= 0 {
			rows[i][j] = c
		}
	}
	return rows
}

// fleetPageRow is one replica on the page: its AEAD's figures picked out.
type fleetPageRow struct {
	FleetHost
	Impl        string
	Small, Bulk string // the AEAD's implementation at 1 KiB and 16 KiB, MB/s with the trials' range
	Age         string
}

// ServeFleetPage renders the view as a page like /speed's: no script, no
// external asset.
func ServeFleetPage(c *fiber.Ctx, v *FleetView) error {
	rows := make([]fleetPageRow, 0, len(v.Hosts))
	for _, h := range v.Hosts {
		r := fleetPageRow{FleetHost: h, Impl: h.Implementations[h.AEAD], Small: "–", Bulk: "–", Age: roundDuration(time.Duration(h.AgeSeconds * float64(time.Second)))}
		for _, cell := range h.Cells {
			if cell.Cipher != h.AEAD || cell.Impl != r.Impl {
				continue
			}
			s := fmt.Sprintf("%s (%s–%s)", formatMBps(cell.Rate), formatMBps(cell.Min), formatMBps(cell.Max))
			switch cell.Size {
			case 1024:
				r.Small = s
			case 16384:
				r.Bulk = s
			}
		}
		rows = append(rows, r)
	}
	var b strings.Builder
	if err := fleetPageTemplate().Execute(&b, struct {
		V    *FleetView
		Rows []fleetPageRow
	}{v, rows}); err != nil {
		return err
	}
	setPageHeaders(c)
	return c.SendString(b.String())
}

// fleetPageTemplate is parsed on first use, as pageTemplate is.
var fleetPageTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("fleet").Parse(fleetPageHTML))
})

const fleetPageHTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>cipherd fleet speed</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:1.2rem;color:#1a1a1a;max-width:80rem}
h1{font-size:1.3rem;margin:0 0 .4rem}
p.note{background:#f4f6f8;border-left:4px solid #4a7ab5;padding:.5rem .8rem}
p.note.mixed{border-color:#c0392b;background:#fbeeee}
.wrap{overflow-x:auto}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
th,td{padding:.3rem .6rem;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}
td.n{text-align:right;white-space:nowrap}
tr.differs td{background:#fdf2e9}
.flag{color:#c0392b;font-weight:600}
small{color:#555}
@media (max-width:640px){body{margin:.8rem}
table,tbody,tr,td{display:block}thead{display:none}
tr{border:1px solid #ddd;border-radius:6px;margin:0 0 .8rem;padding:.3rem .2rem}
td{border:0;padding:.15rem .5rem;text-align:left}td.n{text-align:left;white-space:normal}
td[data-label]::before{content:attr(data-label) ": ";color:#555;font-size:.85em}
td.first{font-weight:600}}
</style></head><body>
<h1>cipherd fleet: every replica's host</h1>
<p class="note{{if .V.Mixed}} mixed{{end}}">{{.V.Note}}</p>
<div class="wrap"><table>
<thead><tr><th>replica</th><th>CPU</th><th>cores / GOMAXPROCS</th><th>AEAD</th><th>1 KiB, MB/s</th><th>16 KiB, MB/s</th><th>implementations</th><th>version</th><th>reported</th></tr></thead>
<tbody>
{{range .Rows}}<tr{{if .Differs}} class="differs"{{end}}>
<td class="first" style="overflow-wrap:anywhere">{{.Hostname}}<br><small>{{.Replica}}{{if .Self}} (this replica){{end}}</small>{{if .Differs}}<br><span class="flag">selection differs</span>{{end}}</td>
<td data-label="CPU">{{.CPU}}{{if .Disabled}}<br><small>switched off: {{range $i, $f := .Disabled}}{{if $i}}, {{end}}{{$f}}{{end}}</small>{{end}}</td>
<td class="n" data-label="cores / GOMAXPROCS">{{.LogicalCores}} / {{.GOMAXPROCS}}</td>
<td data-label="AEAD">{{.AEAD}} <small>{{.Impl}}</small></td>
<td class="n" data-label="1 KiB, MB/s">{{.Small}}</td>
<td class="n" data-label="16 KiB, MB/s">{{.Bulk}}</td>
<td data-label="implementations"><small>{{range $c, $i := .Implementations}}{{$c}}: {{$i}}<br>{{end}}</small></td>
<td data-label="version"><small>{{.Version}}</small></td>
<td data-label="reported"><small>{{if .Self}}now{{else}}{{.Age}} ago{{end}}</small></td>
</tr>
{{end}}</tbody></table></div>
<p><small>{{len .V.Hosts}} replica(s){{if .V.Shared}} reporting within {{printf "%.0f" .V.MaxAge}} s{{end}}. Keys pinning an AEAD: {{range $a, $n := .V.PinnedKeys}}{{$a}} {{$n}}; {{else}}none; {{end}}keys following each replica's choice: {{.V.UnpinnedKeys}}. Figures: the median of each cell's trials with their range, from each replica's speed table (or its start-up profile).</small></p>
</body></html>
`
