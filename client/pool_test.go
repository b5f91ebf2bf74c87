package client_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/cipherd/cipherd/client"
)

// A server (or a proxy) that refuses an upload early, closes the
// connection, and does not say Connection: close: the dead connection must
// not carry the client's next request.
func TestClientEarlyAnswerWithoutConnectionClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if req.URL.Path == "/readyz" {
						io.Copy(io.Discard, req.Body)
						io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
						continue
					}
					body := `{"code":"unauthenticated","message":"no","request_id":"r1"}`
					io.WriteString(conn, "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body)
					return // closes with the upload unread: a reset
				}
			}()
		}
	}()
	c, err := client.New("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for round := range 20 {
		_, err := c.EncryptStream(ctx, "default", io.Discard, newZeros(64<<20), nil)
		if !errors.Is(err, client.ErrUnauthenticated) {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := c.Ready(ctx); err != nil {
			t.Fatalf("round %d: the request after an early answer: %v", round, err)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
