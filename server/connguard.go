package server

import (
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/pires/go-proxyproto"
	"github.com/valyala/fasthttp"

	"github.com/cipherd/cipherd/api"
)

// fasthttp sets a connection's read deadline twice per request: the idle
// timeout before it waits for the next request, the request timeout once its
// first byte is in. Each is a timer update in the runtime, with a clock read
// and a lock, although the next request is usually in the buffer already and
// no read waits under the second one; a streaming body moves its deadline
// again on every read. coalescingConn makes most of them free: it notes the
// deadline asked for and sets it on the connection only when a read is about
// to happen and the one in force is not close enough.
//
// The deadline in force when a read starts is never later than the one
// asked for, and at most slack earlier: a deadline moved earlier is always
// set, one moved later only when the one in force would end the read more
// than slack too soon. slack is a sixteenth of the shortest timeout the
// server sets, and at most a second, so that a timeout fires after at least
// 15/16 of its length.
//
// A read that is blocked already keeps the deadline it started with: setting
// one from another goroutine does not interrupt it. cipherd and fasthttp set
// a connection's read deadline only before they read from it, and stop
// connections by closing them.
type coalescingConn struct {
	net.Conn
	// peer is the address of the connection's other end when RemoteAddr
	// is not: a proxy that speaks the PROXY protocol, whose RemoteAddr is
	// its client's. nil otherwise.
	peer    net.Addr
	slack   int64
	want    atomic.Int64 // the read deadline asked for, in Unix nanoseconds; 0 for none
	inForce atomic.Int64 // the read deadline set on Conn
	linger  atomic.Bool  // read what the client still sends before closing
	sniff   bool         // the first read is still to come on a plain-HTTP port
}

// SetReadDeadline notes t as the read deadline for the reads to come.
func (c *coalescingConn) SetReadDeadline(t time.Time) error {
	c.want.Store(unixNanos(t))
	return nil
}

// SetDeadline sets both deadlines at once.
func (c *coalescingConn) SetDeadline(t time.Time) error {
	w := unixNanos(t)
	c.want.Store(w)
	c.inForce.Store(w)
	return c.Conn.SetDeadline(t)
}

// Read sets the read deadline asked for if the one in force is not close
// enough, then reads.
func (c *coalescingConn) Read(p []byte) (int, error) {
	if w, f := c.want.Load(), c.inForce.Load(); w != f && (w == 0 || f == 0 || w < f || w-f > c.slack) {
		if err := c.apply(w); err != nil {
			return 0, err
		}
	}
	n, err := c.Conn.Read(p)
	if c.sniff {
		c.sniff = false
		if n > 0 && p[0] == tlsHandshakeRecord {
			return 0, c.refuseTLS()
		}
	}
	return n, err
}

// tlsHandshakeRecord is the first byte of a TLS client's first record; no
// HTTP request starts with it (a method is a token).
const tlsHandshakeRecord = 0x16

// plainHTTPAnswer is what a TLS client gets from a port that serves plain
// HTTP. Without it fasthttp would wait the request timeout for a request
// line that never ends; with it Go's client reports "server gave HTTP
// response to HTTPS client" and curl "wrong version number" at once.
var plainHTTPAnswer = func() []byte {
	body := `{"code":"` + string(api.CodeBadRequest) + `","message":"this port serves plain HTTP, and a TLS handshake came in: use http://, or configure tls_cert"}`
	return []byte("HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + body)
}()

// refuseTLS answers a TLS handshake on a plain-HTTP connection and returns
// the error that ends the connection.
func (c *coalescingConn) refuseTLS() error {
	c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
	c.Conn.Write(plainHTTPAnswer)
	return errTLSOnPlainPort
}

var errTLSOnPlainPort = errors.New("server: a TLS handshake on a plain HTTP port")

// A connection that refused a request body lingers before it closes: for
// lingerTimeout at most, during which it reads and discards up to
// lingerBytes of what the client still sends, and stops when the client
// closes its side or sends nothing for lingerIdle (one that sent Expect:
// 100-continue and got the refusal instead, say). A client still sending
// beyond lingerBytes is not read further: its writes block until the
// connection closes, so discarding its upload costs the server at most
// lingerBytes of reading.
const (
	lingerTimeout = time.Second
	lingerIdle    = 500 * time.Millisecond
	lingerBytes   = 1 << 20
)

// Close closes the connection, lingering first after lingerOnClose. A client
// streaming an upload that was refused early is still writing when the
// refusal goes out; closing with its bytes unread sends a TCP reset, which
// fails its next write, so that a client that writes the whole body before
// it reads the answer (Go's net/http among them) reports "broken pipe" or
// "connection reset" instead of the 4xx and its code
// (TestLingerAfterRefusedUpload).
func (c *coalescingConn) Close() error {
	if c.linger.Load() {
		c.lingerRead()
	}
	return c.Conn.Close()
}

func (c *coalescingConn) lingerRead() {
	end := time.Now().Add(lingerTimeout)
	buf := make([]byte, 16<<10)
	for n := 0; n < lingerBytes; {
		_ = c.Conn.SetReadDeadline(time.Now().Add(min(time.Until(end), lingerIdle)))
		m, err := c.Conn.Read(buf)
		if err != nil {
			return
		}
		n += m
	}
	time.Sleep(time.Until(end))
}

// lingerOnClose makes Close of the server's connection conn (as fasthttp
// hands it to a handler: a coalescingConn, or a TLS connection over one)
// linger.
func lingerOnClose(conn net.Conn) {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	if cc, ok := conn.(*coalescingConn); ok {
		cc.linger.Store(true)
	}
}

func (c *coalescingConn) apply(w int64) error {
	c.inForce.Store(w)
	if w == 0 {
		return c.Conn.SetReadDeadline(time.Time{})
	}
	return c.Conn.SetReadDeadline(time.Unix(0, w))
}

func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	if n := t.UnixNano(); n != 0 {
		return n
	}
	return 1 // the instant of the epoch, not "none"
}

// coalescingListener wraps the connections it accepts in coalescingConn.
type coalescingListener struct {
	net.Listener
	slack time.Duration
	plain bool // no TLS above: answer a TLS handshake (refuseTLS)
}

func (l coalescingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cc := &coalescingConn{Conn: c, slack: int64(l.slack), sniff: l.plain}
	if pc, ok := c.(*proxyproto.Conn); ok {
		// Not pc.RemoteAddr, which would wait here for the header.
		cc.peer = pc.Raw().RemoteAddr()
	}
	return cc, nil
}

// peerIP is the IP address of the other end of the request's connection:
// its client, or the proxy that forwarded it over the PROXY protocol,
// whose own trust RemoteIP, the client's address, cannot tell.
func peerIP(ctx *fasthttp.RequestCtx) net.IP {
	c := ctx.Conn()
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if cc, ok := c.(*coalescingConn); ok {
		if a, ok := cc.peer.(*net.TCPAddr); ok {
			return a.IP
		}
	}
	return ctx.RemoteIP()
}

// deadlineSlack is the slack of coalescingConn for the given timeouts: a
// sixteenth of the shortest, at most a second.
func deadlineSlack(timeouts ...time.Duration) time.Duration {
	s := time.Second
	for _, t := range timeouts {
		if t > 0 {
			s = min(s, t/16)
		}
	}
	return s
}
