package server_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/gofiber/fiber/v2"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/server"
)

// Embed cipherd with keys held in memory: the program opens the keystore,
// hands it to the server, and closes it after Shutdown. Any
// cryptosvc.Keystore will do: cryptosvc.OpenFileStore for keys that outlive
// the process, cryptosvc/pgstore for a database that several replicas
// share.
func Example() {
	dir, _ := os.MkdirTemp("", "cipherd-example")
	defer os.RemoveAll(dir)
	store := cryptosvc.NewMemStore()
	defer store.Close()
	srv, err := server.New(context.Background(), server.Config{
		DataDir:       dir, // the hashed admin token and the speed cache
		Keystore:      store,
		AdminToken:    "example-admin-token",
		SkipBenchmark: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown(context.Background())

	key, err := srv.Service().DescribeKey(context.Background(), "default")
	fmt.Println(key.Name, err)
	// Output: default <nil>
}

// Mount cipherd in a host fiber app under /crypto. The host app must stream
// request bodies for cipherd's streaming routes to run in constant memory.
func ExampleServer_App() {
	dir, _ := os.MkdirTemp("", "cipherd-example")
	defer os.RemoveAll(dir)
	store, err := cryptosvc.OpenFileStore(dir+"/keys", cryptosvc.FileStoreConfig{DevRootKey: true})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	srv, err := server.New(context.Background(), server.Config{
		DataDir:       dir,
		Keystore:      store,
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
