package cryptosvc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"strings"

	"github.com/cipherd/cipherd/cryptosvc"
)

// newService returns a Service over an in-memory keystore holding one key,
// "orders". A program that keeps its keys would use OpenFileStore instead.
func newService(ctx context.Context) *cryptosvc.Service {
	svc, err := cryptosvc.New(cryptosvc.Config{Keystore: cryptosvc.NewMemStore()})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := svc.CreateKey(ctx, "orders", cryptosvc.KeyConfig{}); err != nil {
		log.Fatal(err)
	}
	return svc
}

// Embedding cipherd: seal a message under a named key, bound to a context,
// and open it again. The ciphertext names its key, version and AEAD; the
// context is not stored in it, and opening with another context fails.
func ExampleService() {
	ctx := context.Background()
	svc, err := cryptosvc.New(cryptosvc.Config{Keystore: cryptosvc.NewMemStore()})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := svc.CreateKey(ctx, "orders", cryptosvc.KeyConfig{}); err != nil {
		log.Fatal(err)
	}

	ct, info, err := svc.Seal(ctx, "orders", []byte("hello, world"), []byte("order-id=42"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("sealed under %s v%d with %s (%s mode): %d bytes\n", info.Key, info.Version, info.AEAD, info.Mode, len(ct))

	pt, _, err := svc.Open(ctx, "orders", ct, []byte("order-id=42"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("opened: %s\n", pt)

	_, _, err = svc.Open(ctx, "orders", ct, []byte("order-id=43"))
	fmt.Println("other context:", errors.Is(err, cryptosvc.ErrAuthFailed))
	// Output:
	// sealed under orders v1 with aes-256-gcm (direct mode): 95 bytes
	// opened: hello, world
	// other context: true
}

// Encrypt a stream of any length in constant memory, then decrypt it as it
// is read. The writer must be closed: Close writes the final chunk, without
// which the stream reads as truncated.
func ExampleService_EncryptWriter() {
	ctx := context.Background()
	svc := newService(ctx)
	plaintext := strings.Repeat("a line of a large export\n", 2000) // 50000 bytes

	var sealed bytes.Buffer
	w, err := svc.EncryptWriter(ctx, "orders", &sealed, []byte("export.csv"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := io.Copy(w, strings.NewReader(plaintext)); err != nil {
		log.Fatal(err)
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d bytes sealed into %d (%s mode)\n", len(plaintext), sealed.Len(), w.Info().Mode)

	r, err := svc.DecryptReader(ctx, "orders", &sealed, []byte("export.csv"))
	if err != nil {
		log.Fatal(err)
	}
	var out strings.Builder
	if _, err := io.Copy(&out, r); err != nil { // only authenticated chunks come out
		log.Fatal(err)
	}
	fmt.Println("round trip:", out.String() == plaintext)
	// Output:
	// 50000 bytes sealed into 50235 (envelope mode)
	// round trip: true
}

// Read a range from the middle of a sealed object without decrypting the
// rest: only the chunks the range touches (and the final chunk, to learn the
// size) are read and authenticated. Any io.ReaderAt works, such as an
// *os.File or an object-store client.
func ExampleService_DecryptReaderAt() {
	ctx := context.Background()
	svc := newService(ctx)

	var sealed bytes.Buffer
	w, err := svc.EncryptWriter(ctx, "orders", &sealed, nil)
	if err != nil {
		log.Fatal(err)
	}
	for i := range 10000 {
		fmt.Fprintf(w, "record %05d\n", i) // 13 bytes each
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}

	obj := bytes.NewReader(sealed.Bytes())
	ra, err := svc.DecryptReaderAt(ctx, "orders", obj, obj.Size(), nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("plaintext size:", ra.Size())

	p := make([]byte, 12)
	if _, err := ra.ReadAt(p, 7654*13); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", p)
	// Output:
	// plaintext size: 130000
	// record 07654
}

// After a rotation, move a stream to the new key version by rewriting its
// header alone. The body is returned byte for byte, so a large object can be
// rewrapped by replacing its first few hundred bytes; no context is needed.
func ExampleService_Rewrap() {
	ctx := context.Background()
	svc := newService(ctx)

	var sealed bytes.Buffer
	w, err := svc.EncryptWriter(ctx, "orders", &sealed, []byte("backup-2025-01"))
	if err != nil {
		log.Fatal(err)
	}
	io.WriteString(w, "the contents of a large backup")
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	old := sealed.Bytes()

	if _, err := svc.RotateKey(ctx, "orders"); err != nil {
		log.Fatal(err)
	}

	// Pass the header only: it is all Rewrap needs from a stream.
	_, n, err := cryptosvc.ParseHeader(old)
	if err != nil {
		log.Fatal(err)
	}
	header, info, err := svc.Rewrap(ctx, "orders", old[:n], nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rewrapped to %s v%d: header %d -> %d bytes\n", info.Key, info.Version, n, len(header))

	rewrapped := append(header, old[n:]...)
	pt, info, err := svc.Open(ctx, "orders", rewrapped, []byte("backup-2025-01"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("opened under v%d: %s\n", info.Version, pt)
	// Output:
	// rewrapped to orders v2: header 115 -> 115 bytes
	// opened under v2: the contents of a large backup
}

// Get a fresh key for the caller's own encryption, together with a sealed
// copy to store next to the data. Later, Open recovers the key from the
// sealed copy. With plaintext false, only the sealed copy is returned.
func ExampleService_NewDataKey() {
	ctx := context.Background()
	svc := newService(ctx)

	dk, err := svc.NewDataKey(ctx, "orders", 32, []byte("bucket=invoices"), true)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("data key: %d bytes, sealed copy: %d bytes under %s v%d\n",
		len(dk.Plaintext), len(dk.Wrapped), dk.Info.Key, dk.Info.Version)

	key, _, err := svc.Open(ctx, "orders", dk.Wrapped, []byte("bucket=invoices"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("recovered:", bytes.Equal(key, dk.Plaintext))

	wrappedOnly, err := svc.NewDataKey(ctx, "orders", 32, []byte("bucket=invoices"), false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("plaintext withheld:", wrappedOnly.Plaintext == nil)
	// Output:
	// data key: 32 bytes, sealed copy: 115 bytes under orders v1
	// recovered: true
	// plaintext withheld: true
}
