package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"syscall"
	"time"
)

// Dialing as http.DefaultTransport does.
const (
	dialTimeout = 30 * time.Second
	keepAlive   = 30 * time.Second
)

// The service may answer before it has read the whole request: an unknown
// key, a bad token, a body over the limit, a ciphertext whose header or
// first chunk fails. It then closes the connection with the rest of the
// upload unread, and the kernel answers the next segments the client sends
// with a reset. net/http's transport treats the failed write as the
// request's outcome and drops the answer it has already received or is about
// to (RFC 9112 §9.6 describes the race). So the connections the client dials
// itself are wrapped in earlyConn: a write the peer refused is reported as
// done, nothing more is sent, and the request body stops, so the transport
// goes on to read the answer. If the peer is gone without one, the read
// fails too and the write error is reported instead.

// earlyConn is a client connection that hides a refused write from the
// transport and remembers it.
type earlyConn struct {
	net.Conn
	mu   sync.Mutex
	werr error // the first write the peer refused
}

func (c *earlyConn) Write(p []byte) (int, error) {
	if c.refused() != nil {
		return len(p), nil
	}
	n, err := c.Conn.Write(p)
	if err != nil && peerClosed(err) {
		c.mu.Lock()
		c.werr = err
		c.mu.Unlock()
		return len(p), nil
	}
	return n, err
}

// ReadFrom copies r to the connection through Write as copyPieces does.
// The transport hands an upload of known length to its connection's
// ReadFrom once its buffer has gone out; without this method io.Copy would
// read and write it 32 KiB at a time, a read and a write system call per
// 32 KiB (BenchmarkClientStream, strace -c of cipherd encrypt).
func (c *earlyConn) ReadFrom(r io.Reader) (int64, error) {
	return copyPieces(c.Write, r.Read)
}

// sendPiece is the most an upload hands the socket per write. The service
// reads uploads sent in 64 KiB writes with less CPU than the same bytes
// sent in 256 KiB writes (its kernel time per GiB), so a client on a core
// of its own keeps up with curl -T, which writes 64 KiB at a time: the
// clients' rounds of scripts/loadbench.sh, BENCHMARKS.md.
const sendPiece = 64 << 10

// copyPieces copies from read to write until read returns io.EOF, reading
// ioBufferSize at a time into a pooled buffer and writing it in pieces of
// sendPiece. It takes the two methods rather than an io.Writer and an
// io.Reader so that io.Copy's use of ReadFrom and WriteTo, which call it,
// cannot send it back to them.
func copyPieces(write, read func([]byte) (int, error)) (int64, error) {
	buf := copyBufs.Get().(*[ioBufferSize]byte)
	defer copyBufs.Put(buf)
	var total int64
	for {
		n, err := read(buf[:])
		for p := buf[:n]; len(p) > 0; {
			k, werr := write(p[:min(len(p), sendPiece)])
			total += int64(k)
			if werr != nil {
				return total, werr
			}
			p = p[k:]
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// refused returns the write error the peer caused, if any.
func (c *earlyConn) refused() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.werr
}

// peerClosed reports whether a write failed because the peer closed or reset
// the connection, rather than because it was closed here or timed out.
func peerClosed(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// dialEarly wraps dial's connections in earlyConn.
func dialEarly(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &earlyConn{Conn: c}, nil
	}
}

// connWatch learns which connection carries a request, so that its body can
// stop once the peer refuses more.
type connWatch struct {
	pace *pacer // stopped on a connection that is not an earlyConn
	mu   sync.Mutex
	got  bool       // the request had a connection
	conn *earlyConn // nil with a transport of the caller's
}

// trace returns ctx with a trace that records the request's connection.
func (w *connWatch) trace(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		c := info.Conn
		if tc, ok := c.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
			c = tc.NetConn()
		}
		ec, _ := c.(*earlyConn)
		w.mu.Lock()
		w.got, w.conn = true, ec
		w.mu.Unlock()
		if ec == nil && w.pace != nil {
			w.pace.stop()
		}
	}})
}

// connected reports whether the request had a connection: the service may
// have seen some of it.
func (w *connWatch) connected() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.got
}

// minRTT returns the request's connection's smallest round-trip time, if
// known.
func (w *connWatch) minRTT() (time.Duration, bool) {
	w.mu.Lock()
	c := w.conn
	w.mu.Unlock()
	if c == nil {
		return 0, false
	}
	return c.minRTT()
}

// refused returns the write error the peer caused on the request's
// connection, if any.
func (w *connWatch) refused() error {
	w.mu.Lock()
	c := w.conn
	w.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.refused()
}

// newTransport returns the transport of a client made without
// WithHTTPClient.
func newTransport(c *Client) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if c.tls != nil {
		t.TLSClientConfig = c.tls.Clone()
	}
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive}
	t.DialContext = dialEarly(d.DialContext)
	// Streams move in pieces of this size rather than the transport's
	// 4 KiB: a system call per 256 KiB of upload or answer instead of per
	// 4 KiB (cmd/cipherd's stream benchmark against curl, BENCHMARKS.md).
	t.WriteBufferSize, t.ReadBufferSize = ioBufferSize, ioBufferSize
	return t
}

// ioBufferSize is the transport's read and write buffer per connection.
const ioBufferSize = 256 << 10
