package client_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"strings"

	"go.uber.org/zap"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/client"
	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/server"
)

// exampleServer starts a throw-away cipherd on a loopback port, as a
// deployment would run it, and returns its URL and a function to stop it.
func exampleServer() (string, func()) {
	dir, err := os.MkdirTemp("", "cipherd-example")
	if err != nil {
		log.Fatal(err)
	}
	srv, err := server.New(context.Background(), server.Config{DataDir: dir, Keystore: cryptosvc.NewMemStore(), AdminToken: "example-token", SkipBenchmark: true, Logger: zap.NewNop()})
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() {
		srv.Shutdown(context.Background())
		os.RemoveAll(dir)
	}
}

func Example() {
	url, stop := exampleServer()
	defer stop()
	ctx := context.Background()

	c, err := client.New(url, client.WithToken("example-token"))
	if err != nil {
		log.Fatal(err)
	}

	// One message, bound to a context that decryption must present again.
	res, err := c.Encrypt(ctx, "default", []byte("card 4111 1111 1111 1111"), []byte("customer 42"))
	if err != nil {
		log.Fatal(err)
	}
	pt, err := c.Decrypt(ctx, "default", res.Ciphertext, []byte("customer 42"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s (key version %d)\n", pt, res.KeyVersion)

	// The wrong context is refused with a stable code.
	_, err = c.Decrypt(ctx, "default", res.Ciphertext, []byte("customer 43"))
	fmt.Println(client.IsCode(err, api.CodeDecryptFailed))

	// A stream of any size, in constant memory on both sides.
	var sealed, opened bytes.Buffer
	if _, err := c.EncryptStream(ctx, "default", &sealed, strings.NewReader(strings.Repeat("log line\n", 100000)), nil); err != nil {
		log.Fatal(err)
	}
	if _, err := c.DecryptStream(ctx, "default", &opened, &sealed, nil); err != nil {
		log.Fatal(err)
	}
	fmt.Println(opened.Len())
	// Output:
	// card 4111 1111 1111 1111 (key version 1)
	// true
	// 900000
}

// A batch answers item by item: one bad item does not fail the others.
func ExampleClient_DecryptBatch() {
	url, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	c, _ := client.New(url, client.WithToken("example-token"))

	enc, err := c.EncryptBatch(ctx, "default", []api.EncryptItem{
		{Plaintext: []byte("a"), Reference: "row-1"},
		{Plaintext: []byte("b"), Reference: "row-2"},
	})
	if err != nil {
		log.Fatal(err)
	}
	dec, err := c.DecryptBatch(ctx, "default", []api.DecryptItem{
		{Ciphertext: enc[0].Ciphertext, Reference: "row-1"},
		{Ciphertext: enc[1].Ciphertext, Context: []byte("not what it was sealed with"), Reference: "row-2"},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range dec {
		if r.Error != nil {
			fmt.Println(r.Reference, r.Error.Code)
			continue
		}
		fmt.Println(r.Reference, string(r.Plaintext))
	}
	// Output:
	// row-1 a
	// row-2 decryption_failed
}

// Sealing here, opening here or on the service: the service hands out a
// sealing key (one call per 2^20 messages, 4 GiB or 5 minutes by default)
// and the key of one message to open it; the data never goes to it.
func ExampleLocalSealer() {
	url, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	c, err := client.New(url, client.WithToken("example-token"))
	if err != nil {
		log.Fatal(err)
	}
	sealer, err := c.NewLocalSealer("default", client.LocalLimits{})
	if err != nil {
		log.Fatal(err)
	}
	var buf []byte
	for i := range 3 {
		// The same sealed format as Encrypt's: the service opens it too.
		buf, err = sealer.AppendSeal(ctx, buf[:0], fmt.Appendf(nil, "event %d", i), []byte("stream 7"))
		if err != nil {
			log.Fatal(err)
		}
		local, err := c.OpenLocal(ctx, "default", buf, []byte("stream 7"))
		if err != nil {
			log.Fatal(err)
		}
		remote, err := c.Decrypt(ctx, "default", buf, []byte("stream 7"))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s / %s\n", local, remote)
	}
	// Output:
	// event 0 / event 0
	// event 1 / event 1
	// event 2 / event 2
}
