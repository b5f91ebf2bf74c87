// Command baseline is the yardstick of cipherd's HTTP benchmarks: a bare fiber
// app that does the same cryptographic work with none of cipherd's around it
// (no auth, no key lookup, no per-message key derivation, no metrics, no
// logs). POST /seal takes {"plaintext": base64} and answers
// {"ciphertext": base64} sealed with AES-128-GCM under a fixed key; POST
// /stream seals an octet-stream body in 16 KiB AES-128-GCM chunks under a
// fixed key and streams them back. With -echo it is instead the ceiling of a
// Go server for streams: a net/http server whose every route copies the
// request body back (io.Copy(w, r.Body)), with no cryptography and no fiber.
// It is used by scripts/loadbench.sh only.
package main

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"flag"
	"io"
	"log"
	"net/http"

	"github.com/gofiber/fiber/v2"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address")
	buf := flag.Int("buf", 256<<10, "read and write buffer size")
	echo := flag.Bool("echo", false, "serve a net/http echo of the request body instead")
	flag.Parse()
	if *echo {
		log.Fatal(http.ListenAndServe(*addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(w, r.Body)
		})))
	}
	block, _ := aes.NewCipher(make([]byte, 16))
	aead, _ := cipher.NewGCM(block)

	app := fiber.New(fiber.Config{DisableStartupMessage: true, StreamRequestBody: true, ReadBufferSize: *buf, WriteBufferSize: *buf})
	app.Post("/seal", func(c *fiber.Ctx) error {
		var req struct {
			Plaintext []byte `json:"plaintext"`
		}
		if err := json.Unmarshal(c.Body(), &req); err != nil {
			return fiber.ErrBadRequest
		}
		nonce := make([]byte, 12)
		rand.Read(nonce)
		return c.JSON(fiber.Map{"ciphertext": aead.Seal(nonce, nonce, req.Plaintext, nil)})
	})
	app.Post("/stream", func(c *fiber.Ctx) error {
		c.Context().SetBodyStream(&sealer{src: c.Context().RequestBodyStream(), aead: aead, buf: make([]byte, 16384+16)}, -1)
		return nil
	})
	log.Fatal(app.Listen(*addr))
}

// sealer seals its source in 16 KiB chunks under a counter nonce.
type sealer struct {
	src  io.Reader
	aead cipher.AEAD
	buf  []byte
	out  []byte
	n    uint64
	done bool
}

func (s *sealer) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if s.done {
			return 0, io.EOF
		}
		k, err := io.ReadFull(s.src, s.buf[:16384])
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			s.done = true
		} else if err != nil {
			return 0, err
		}
		var nonce [12]byte
		binary.BigEndian.PutUint64(nonce[4:], s.n)
		s.n++
		s.out = s.aead.Seal(s.buf[:0], nonce[:], s.buf[:k], nil)
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}
