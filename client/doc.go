// Package client is a Go client for cipherd's REST API: one-shot and batch
// JSON requests, data keys, key administration, service tokens, and
// streaming encryption and decryption of any size through io.Reader and
// io.Writer.
//
// It speaks the wire contract of package api over net/http and nothing else;
// it imports neither the server nor the cryptography.
//
//	c, err := client.New("https://cipherd.internal:8443", client.WithToken(token))
//	res, err := c.Encrypt(ctx, "orders", plaintext, []byte("order 42"))
//	pt, err := c.Decrypt(ctx, "orders", res.Ciphertext, []byte("order 42"))
//
// A workload whose token something else renews in a file (a Kubernetes
// projected service-account token, a JWT that cipherd verifies against its
// issuer) uses WithTokenFile, which reads the file for every request.
//
// Errors from the service are *Error values with the HTTP status and a stable
// code (see IsCode and the Err… sentinels), also when the service refuses an
// upload before reading it (an unknown key, a bad token, a body over the
// limit) and closes the connection while the client is still sending. A
// batch answers item by item: the results carry per-item errors.
//
// Streams (EncryptStream, DecryptStream) send the request body and read the
// response at the same time, in constant memory. A decrypted stream is
// complete only when all of its Content-Length came or, chunked, the service
// ended it with the trailer Cipherd-Status: ok; DecryptStream checks it and
// fails otherwise, so a cut connection or a truncated ciphertext never
// passes for a whole plaintext.
//
// References:
//   - package api: routes, wire types and error codes; GET /v1/api lists limits
//   - docs/FORMAT.md: the sealed format (c2sp.org/chunked-encryption)
//   - RFC 9110 and RFC 9112: HTTP semantics, chunked transfer coding and trailers
package client
