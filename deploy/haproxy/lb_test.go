//go:build linux

package haproxy

import (
	"encoding/csv"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/internal/proctest"
)

// lbParams are what the test changes in the example configuration.
type lbParams struct {
	Bind, StatsBind, Socket     string
	Inter, FastInter, DownInter string
	Servers                     [][2]string // name, address
	ProxyProtocol               bool        // uncomment the example's send-proxy-v2 line
}

// proxyProtocolLine is the example's commented line that sends the PROXY
// protocol header to the replicas.
const proxyProtocolLine = "#default-server send-proxy-v2 check-send-proxy"

var checkTimingRE = regexp.MustCompile(`\b(inter|fastinter|downinter) \S+`)

// renderConfig rewrites the example configuration for a test: the frontend
// and stats addresses, the stats socket, the check intervals on the
// default-server line, the server list, and with p.ProxyProtocol the
// commented line that sends the PROXY protocol header. Every other line is the
// example's. It fails when the example no longer has the shape it expects,
// so that the test keeps testing the file operators copy.
func renderConfig(example string, p lbParams) (string, error) {
	var out []string
	section := ""
	counts := map[string]int{}
	for _, line := range strings.Split(example, "\n") {
		trimmed := strings.TrimSpace(line)
		if line != "" && line[0] != ' ' && line[0] != '\t' && line[0] != '#' {
			section = trimmed
		}
		word, _, _ := strings.Cut(trimmed, " ")
		indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		switch {
		case section == "global" && strings.HasPrefix(trimmed, "stats socket "):
			line = indent + "stats socket " + p.Socket + " mode 600 level admin"
			counts["stats socket"]++
		case section == "frontend cipherd" && word == "bind":
			line = indent + "bind " + p.Bind
			counts["frontend bind"]++
		case section == "listen stats" && word == "bind":
			line = indent + "bind " + p.StatsBind
			counts["stats bind"]++
		case section == "backend cipherd" && word == "default-server":
			n := 0
			line = checkTimingRE.ReplaceAllStringFunc(line, func(m string) string {
				n++
				k, _, _ := strings.Cut(m, " ")
				return k + " " + map[string]string{"inter": p.Inter, "fastinter": p.FastInter, "downinter": p.DownInter}[k]
			})
			if n != 3 || !strings.Contains(line, " check") {
				return "", fmt.Errorf("default-server line %q: want check, inter, fastinter and downinter", trimmed)
			}
			counts["default-server"]++
		case section == "backend cipherd" && trimmed == proxyProtocolLine:
			counts["proxy protocol"]++
			if p.ProxyProtocol {
				line = indent + strings.TrimPrefix(trimmed, "#")
			}
		case section == "backend cipherd" && word == "server":
			if counts["server"]++; counts["server"] > 1 {
				continue
			}
			for _, s := range p.Servers {
				out = append(out, indent+"server "+s[0]+" "+s[1])
			}
			continue
		}
		out = append(out, line)
	}
	for _, k := range []string{"stats socket", "frontend bind", "stats bind", "default-server", "proxy protocol", "server"} {
		if counts[k] == 0 || k != "server" && counts[k] != 1 {
			return "", fmt.Errorf("expected one %q line in its section, found %d", k, counts[k])
		}
	}
	return strings.Join(out, "\n"), nil
}

// stats runs "show stat" on the stats socket and returns every row by
// "proxy/server" (server "BACKEND" and "FRONTEND" for the totals), each
// field by its CSV header name.
func (c *cluster) stats() (map[string]map[string]string, error) {
	conn, err := net.DialTimeout("unix", c.statsSocket, time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(conn, "show stat\n"); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(conn) // a non-interactive command's answer ends with the connection
	if err != nil {
		return nil, err
	}
	r := csv.NewReader(strings.NewReader(strings.TrimPrefix(string(b), "# ")))
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil || len(recs) < 2 {
		return nil, fmt.Errorf("show stat: %v: %q", err, b)
	}
	rows := map[string]map[string]string{}
	for _, rec := range recs[1:] {
		row := map[string]string{}
		for i, h := range recs[0] {
			if i < len(rec) {
				row[h] = rec[i]
			}
		}
		rows[row["pxname"]+"/"+row["svname"]] = row
	}
	return rows, nil
}

// serverStatus returns HAProxy's status of a replica: UP, DOWN, or a
// transition such as "UP 1/2".
func (c *cluster) serverStatus(r *replica) string {
	rows, err := c.stats()
	if err != nil {
		return "stats: " + err.Error()
	}
	return rows["cipherd/"+r.name]["status"]
}

// waitStatus waits until HAProxy reports the replica's status as want.
func (c *cluster) waitStatus(t *testing.T, r *replica, want string) {
	t.Helper()
	var got string
	if !proctest.Poll(15*time.Second, func() bool { got = c.serverStatus(r); return got == want || !c.lb.running() }) || !c.lb.running() {
		t.Fatalf("HAProxy reports %s as %q, want %q", r.name, got, want)
	}
}

// counter returns a numeric stats field of a row ("cipherd/BACKEND").
func (c *cluster) counter(t *testing.T, row, field string) int64 {
	t.Helper()
	rows, err := c.stats()
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(rows[row][field], 10, 64)
	if err != nil && rows[row][field] != "" {
		t.Fatalf("stats %s %s = %q", row, field, rows[row][field])
	}
	return v
}

func TestRenderConfigRefusesOtherShapes(t *testing.T) {
	p := lbParams{Bind: "127.0.0.1:1", StatsBind: "127.0.0.1:2", Socket: "/s", Inter: "1s", FastInter: "1s", DownInter: "1s",
		Servers: [][2]string{{"a", "127.0.0.1:3"}}}
	good := "global\n    stats socket /x\nfrontend cipherd\n    bind :80\nbackend cipherd\n" +
		"    default-server check inter 2s fastinter 1s downinter 2s\n    #default-server send-proxy-v2 check-send-proxy\n" +
		"    server s1 10.0.0.1:80\n    server s2 10.0.0.2:80\nlisten stats\n    bind :81\n"
	out, err := renderConfig(good, p)
	if err != nil {
		t.Fatal(err)
	}
	want := "global\n    stats socket /s mode 600 level admin\nfrontend cipherd\n    bind 127.0.0.1:1\nbackend cipherd\n" +
		"    default-server check inter 1s fastinter 1s downinter 1s\n    #default-server send-proxy-v2 check-send-proxy\n" +
		"    server a 127.0.0.1:3\nlisten stats\n    bind 127.0.0.1:2\n"
	if out != want {
		t.Fatalf("rendered:\n%s\nwant:\n%s", out, want)
	}
	p.ProxyProtocol = true
	out, err = renderConfig(good, p)
	if want := strings.Replace(want, "#default-server send-proxy-v2", "default-server send-proxy-v2", 1); err != nil || out != want {
		t.Fatalf("rendered with the PROXY protocol (%v):\n%s\nwant:\n%s", err, out, want)
	}
	p.ProxyProtocol = false
	for _, bad := range []string{
		strings.Replace(good, "frontend cipherd", "frontend web", 1),
		strings.Replace(good, " fastinter 1s", "", 1),
		strings.Replace(good, "    server s1 10.0.0.1:80\n    server s2 10.0.0.2:80\n", "", 1),
		strings.Replace(good, "    stats socket /x\n", "", 1),
		strings.Replace(good, "    #default-server send-proxy-v2 check-send-proxy\n", "", 1),
	} {
		if _, err := renderConfig(bad, p); err == nil {
			t.Errorf("rendered a configuration of another shape:\n%s", bad)
		}
	}
}
