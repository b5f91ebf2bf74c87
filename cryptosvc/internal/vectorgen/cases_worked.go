package main

import (
	"bytes"
	"context"

	"github.com/cipherd/cipherd/kernels"
)

// The worked examples of docs/FORMAT.md: key "orders" whose version 1 secret
// is 00 01 … 1f, the plaintext "hello, world", the context "order-id=42", and
// randomness 80 81 82 … from a counter.

var (
	workedPlaintext = []byte("hello, world")
	workedContext   = []byte("order-id=42")
)

func newWorked(name string) *gen {
	g := newGen(name)
	g.rnd = &counter{0x80}
	g.keyName = "orders"
	g.secrets = [][]byte{sequence(0x00, 32)}
	return g
}

func workedExampleDirect() Vector {
	g := newWorked("worked_example_direct_aes256gcm")
	ct := g.seal(kernels.AES256GCM, g.keyName, g.secrets, workedPlaintext, workedContext)
	return g.valid("The worked example of docs/FORMAT.md in direct mode: body salt 80…97.", ct, workedContext, workedPlaintext)
}

func workedExampleEnvelope() Vector {
	g := newWorked("worked_example_envelope_aes128gcm")
	ct := g.stream(kernels.AES128GCM, g.keyName, g.secrets, workedPlaintext, workedContext)
	return g.valid("The worked example of docs/FORMAT.md in envelope mode: data key 80…8f, wrap salt 90…a7, body salt a8…bf.", ct, workedContext, workedPlaintext)
}

func workedExampleRewrapped() Vector {
	g := newWorked("worked_example_rewrapped")
	ctx := context.Background()
	s := g.service(kernels.AES128GCM, g.keyName, g.secrets)
	var buf bytes.Buffer
	w, err := s.EncryptWriter(ctx, g.keyName, &buf, workedContext)
	must(err)
	_, err = w.Write(workedPlaintext)
	must(err)
	must(w.Close())
	_, err = s.RotateKey(ctx, g.keyName) // version 2's secret: c0…df
	must(err)
	ct, _, err := s.Rewrap(ctx, g.keyName, buf.Bytes(), nil) // wrap salt e0…f7
	must(err)
	g.secrets = append(g.secrets, sequence(0xc0, 32))
	return g.valid("The worked example of docs/FORMAT.md rewrapped after a rotation: version 2's secret c0…df, wrap salt e0…f7, the same body.", ct, workedContext, workedPlaintext)
}
