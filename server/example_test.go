package server_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/gofiber/fiber/v2"

	"github.com/cipherd/cipherd/server"
)

// Mount cipherd in a host fiber app under /crypto. The host app must stream
// request bodies for cipherd's streaming routes to run in constant memory.
func ExampleServer_App() {
	dir, _ := os.MkdirTemp("", "cipherd-example")
	defer os.RemoveAll(dir)
	srv, err := server.New(context.Background(), server.Config{
		DataDir:       dir,
		AdminToken:    "example-admin-token",
		SkipBenchmark: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown(context.Background())

	host := fiber.New(fiber.Config{StreamRequestBody: true})
	host.Get("/", func(c *fiber.Ctx) error { return c.SendString("the host app") })
	host.Mount("/crypto", srv.App())
	// host.Listen(":8080") would now serve /crypto/v1/encrypt/default, …
	fmt.Println(srv.Ready())
	// Output: true
}
