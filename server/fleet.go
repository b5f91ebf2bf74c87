package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/zap"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/server/speedview"
)

// The fleet view, GET /speed/fleet: each replica on a shared keystore (a
// cryptosvc.FleetStore: PostgreSQL) publishes a report of its host, its
// selection and the speed of the implementations it uses, every
// fleet_interval and whenever its speed table changes; any replica answers
// with every report younger than fleetAgeOut intervals, so the view is the
// same through a load balancer whichever replica it picks. A replica that
// stops reporting drops out of the view after those intervals. On a keystore
// that only this process uses, the view is this replica alone.

// fleetAgeOut is how many fleet intervals a report stays in the view: a
// replica must miss more than two reports in a row to drop out.
const fleetAgeOut = 3

// fleetHost is one replica's report, a row of the fleet view.
type fleetHost struct {
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
	Cells       []fleetCell `json:"cells"`
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

// fleetCell is one figure of a replica's report.
type fleetCell struct {
	Cipher string  `json:"cipher"`
	Impl   string  `json:"impl"`
	Size   int     `json:"size"`
	Rate   float64 `json:"bytes_per_second"`
	Min    float64 `json:"min_bytes_per_second"`
	Max    float64 `json:"max_bytes_per_second"`
}

// fleetView is the body of GET /speed/fleet.
type fleetView struct {
	// Shared is false when the keystore is not shared: the view is then
	// this replica alone.
	Shared bool        `json:"shared"`
	Hosts  []fleetHost `json:"hosts"`
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

// newReplicaID returns a replica id: random per process, so that replicas
// on one host, and a replica restarted, are told apart.
func newReplicaID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// fleetReport returns this replica's report.
func (sp *speedState) fleetReport() *fleetHost {
	sel := sp.s.sel
	hostname, _ := os.Hostname()
	h := &fleetHost{
		Replica: sp.s.replica, Hostname: hostname,
		CPU: sp.host.Brand, LogicalCores: sp.host.LogicalCores, GOMAXPROCS: sp.host.GOMAXPROCS,
		Features: sp.host.Features, Disabled: sp.host.Disabled,
		AEAD: sel.AEADName, AEADReason: strings.TrimSuffix(sel.AEADReason, "."),
		Implementations: map[string]string{}, Cells: []fleetCell{},
		Version: sp.build.Version, Revision: sp.build.Revision,
		Measured: sel.Measured,
	}
	if h.Features == nil {
		h.Features = []string{}
	}
	find, src := speedview.ProfileCells(sel), "profile"
	if t := sp.table.Load(); t != nil {
		find, src, h.Measured = speedview.TableCells(t.Result), "table", t.Result.Started
	}
	h.CellsSource = src
	for _, ch := range sel.Implementations {
		h.Implementations[ch.Name] = ch.Impl
		for _, size := range speedview.SummarySizes {
			if c, ok := find(ch.Cipher, ch.Impl, size); ok {
				h.Cells = append(h.Cells, fleetCell{Cipher: ch.Name, Impl: ch.Impl, Size: size, Rate: c.Rate, Min: c.Min, Max: c.Max})
			}
		}
	}
	return h
}

// publishFleet publishes this replica's report every interval, and when
// the speed table changes, until ctx ends. Only a shared keystore has a
// fleet to publish to.
func (s *Server) publishFleet(ctx context.Context) {
	fs, ok := s.store.(cryptosvc.FleetStore)
	if !ok {
		return
	}
	t := time.NewTicker(s.cfg.FleetInterval)
	defer t.Stop()
	for {
		s.publishFleetOnce(ctx, fs)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.speed.changed:
		}
	}
}

// publishFleetOnce publishes the report; a failure is logged at warn (the
// keystore's health is reported elsewhere) and retried at the next tick.
func (s *Server) publishFleetOnce(ctx context.Context, fs cryptosvc.FleetStore) {
	b, err := json.Marshal(s.speed.fleetReport())
	if err == nil {
		err = fs.PublishHost(ctx, s.replica, b)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		s.log.Warn("host report not published to the keystore; retried at the next interval", zap.Error(err))
	}
}

// fleetView reads the reports of the live replicas, this one's from
// memory, and flags the replicas whose selection differs from most.
func (s *Server) fleetView(ctx context.Context) (*fleetView, error) {
	maxAge := fleetAgeOut * s.cfg.FleetInterval
	v := &fleetView{PinnedKeys: map[string]int{}, MaxAge: maxAge.Seconds(), Generated: time.Now().UTC()}
	self := s.speed.fleetReport()
	self.Self = true
	v.Hosts = []fleetHost{*self}
	if fs, ok := s.store.(cryptosvc.FleetStore); ok {
		v.Shared = true
		published, err := fs.Hosts(ctx, maxAge)
		if err != nil {
			return nil, err
		}
		for _, p := range published {
			if p.Replica == s.replica {
				continue
			}
			var h fleetHost
			if err := json.Unmarshal(p.Report, &h); err != nil {
				s.log.Warn("a replica's host report does not parse; left out of the fleet view", zap.String("replica", p.Replica), zap.Error(err))
				continue
			}
			h.Replica, h.AgeSeconds, h.Self = p.Replica, p.Age.Seconds(), false
			v.Hosts = append(v.Hosts, h)
		}
	}
	slices.SortFunc(v.Hosts, func(a, b fleetHost) int {
		return strings.Compare(a.Hostname+"/"+a.Replica, b.Hostname+"/"+b.Replica)
	})
	v.flagMixed()
	keys, err := s.svc.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if k.AEAD != "" {
			v.PinnedKeys[k.AEAD]++
		} else {
			v.UnpinnedKeys++
		}
	}
	v.Note = v.note()
	return v, nil
}

// selectionKey is what must match for two replicas to seal alike: the
// AEAD and every cipher's implementation.
func (h *fleetHost) selectionKey() string {
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
func (v *fleetView) flagMixed() {
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
func (v *fleetView) note() string {
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

// handleSpeedFleet serves the fleet view: JSON, a text table in the
// layout of openssl speed's, or an HTML page.
func (s *Server) handleSpeedFleet(c *fiber.Ctx, q *call) error {
	format, err := speedview.Negotiate(c)
	if err != nil {
		return apiError(api.CodeBadRequest, err.Error())
	}
	v, err := s.fleetView(c.UserContext())
	if err != nil {
		if errors.Is(err, cryptosvc.ErrUnavailable) {
			return apiError(api.CodeKeystoreUnavailable, "the keystore holding the fleet's reports cannot be read")
		}
		return err
	}
	switch format {
	case speedview.FormatText, speedview.FormatMR:
		c.Set(fiber.HeaderContentType, fiber.MIMETextPlainCharsetUTF8)
		return v.writeText(c, format == speedview.FormatMR)
	case speedview.FormatHTML:
		return writeFleetPage(c, v)
	}
	return c.JSON(v)
}

// writeText writes the view as openssl speed writes a table: one row per
// replica and implementation in use, its figures at 1 KiB and 16 KiB in
// 1000s of bytes per second; mr writes openssl's -mr lines, one +F per
// row, with the replica as the row's name.
func (v *fleetView) writeText(w io.Writer, mr bool) error {
	var b strings.Builder
	if mr {
		fmt.Fprintf(&b, "+H:%s\n", strings.Join(sizeStrings(), ":"))
	} else {
		b.WriteString("The 'numbers' are in 1000s of bytes per second processed.\n")
		fmt.Fprintf(&b, "%-40s %-20s %-24s", "replica", "aead", "type")
		for _, n := range speedview.SummarySizes {
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

// sizeStrings are speedview.SummarySizes as text.
func sizeStrings() []string {
	var out []string
	for _, n := range speedview.SummarySizes {
		out = append(out, fmt.Sprint(n))
	}
	return out
}

// fleetRows groups a report's cells by implementation, each row holding
// one cell per size of speedview.SummarySizes (a missing one as zero); a report
// without figures (a replica that skipped its benchmark) is one row of
// its AEAD's implementation, all zero.
func fleetRows(h *fleetHost) [][]fleetCell {
	if len(h.Cells) == 0 {
		row := make([]fleetCell, len(speedview.SummarySizes))
		for j, n := range speedview.SummarySizes {
			row[j] = fleetCell{Cipher: h.AEAD, Impl: h.Implementations[h.AEAD], Size: n}
		}
		return [][]fleetCell{row}
	}
	var rows [][]fleetCell
	for _, c := range h.Cells {
		i := slices.IndexFunc(rows, func(r []fleetCell) bool { return r[0].Cipher == c.Cipher && r[0].Impl == c.Impl })
		if i < 0 {
			row := make([]fleetCell, len(speedview.SummarySizes))
			for j, n := range speedview.SummarySizes {
				row[j] = fleetCell{Cipher: c.Cipher, Impl: c.Impl, Size: n}
			}
			rows = append(rows, row)
			i = len(rows) - 1
		}
		if j := slices.Index(speedview.SummarySizes, c.Size); j >= 0 {
			rows[i][j] = c
		}
	}
	return rows
}

// fleetPageRow is one replica on the page: its AEAD's figures picked out.
type fleetPageRow struct {
	fleetHost
	Impl        string
	Small, Bulk string // the AEAD's implementation at 1 KiB and 16 KiB, MB/s with the trials' range
	Age         string
}

// writeFleetPage renders the view as a page like /speed's: no script, no
// external asset.
func writeFleetPage(c *fiber.Ctx, v *fleetView) error {
	rows := make([]fleetPageRow, 0, len(v.Hosts))
	for _, h := range v.Hosts {
		r := fleetPageRow{fleetHost: h, Impl: h.Implementations[h.AEAD], Small: "–", Bulk: "–", Age: speedview.RoundDuration(time.Duration(h.AgeSeconds * float64(time.Second)))}
		for _, cell := range h.Cells {
			if cell.Cipher != h.AEAD || cell.Impl != r.Impl {
				continue
			}
			s := fmt.Sprintf("%s (%s–%s)", speedview.FormatMBps(cell.Rate), speedview.FormatMBps(cell.Min), speedview.FormatMBps(cell.Max))
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
	if err := fleetPageTemplate.Execute(&b, struct {
		V    *fleetView
		Rows []fleetPageRow
	}{v, rows}); err != nil {
		return err
	}
	speedview.SetPageHeaders(c)
	return c.SendString(b.String())
}

var fleetPageTemplate = template.Must(template.New("fleet").Parse(`<!doctype html>
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
</style></head><body>
<h1>cipherd fleet: every replica's host</h1>
<p class="note{{if .V.Mixed}} mixed{{end}}">{{.V.Note}}</p>
<div class="wrap"><table>
<thead><tr><th>replica</th><th>CPU</th><th>cores / GOMAXPROCS</th><th>AEAD</th><th>1 KiB, MB/s</th><th>16 KiB, MB/s</th><th>implementations</th><th>version</th><th>reported</th></tr></thead>
<tbody>
{{range .Rows}}<tr{{if .Differs}} class="differs"{{end}}>
<td>{{.Hostname}}<br><small>{{.Replica}}{{if .Self}} (this replica){{end}}</small>{{if .Differs}}<br><span class="flag">selection differs</span>{{end}}</td>
<td>{{.CPU}}{{if .Disabled}}<br><small>switched off: {{range $i, $f := .Disabled}}{{if $i}}, {{end}}{{$f}}{{end}}</small>{{end}}</td>
<td class="n">{{.LogicalCores}} / {{.GOMAXPROCS}}</td>
<td>{{.AEAD}}<br><small>{{.Impl}}</small></td>
<td class="n">{{.Small}}</td>
<td class="n">{{.Bulk}}</td>
<td><small>{{range $c, $i := .Implementations}}{{$c}}: {{$i}}<br>{{end}}</small></td>
<td><small>{{.Version}}</small></td>
<td><small>{{if .Self}}now{{else}}{{.Age}} ago{{end}}</small></td>
</tr>
{{end}}</tbody></table></div>
<p><small>{{len .V.Hosts}} replica(s){{if .V.Shared}} reporting within {{printf "%.0f" .V.MaxAge}} s{{end}}. Keys pinning an AEAD: {{range $a, $n := .V.PinnedKeys}}{{$a}} {{$n}}; {{else}}none; {{end}}keys following each replica's choice: {{.V.UnpinnedKeys}}. Figures: the median of each cell's trials with their range, from each replica's speed table (or its start-up profile).</small></p>
</body></html>
`))
