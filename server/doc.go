// Package server is cipherd's HTTP service: a fiber v2 app over a
// cryptosvc.Service, with the self-test, the benchmark and the cipher
// selection behind it. New builds it; Serve, ListenAndServe and Shutdown run
// it; App returns the fiber app for an embedding program to mount.
//
// # Request lifecycle
//
// A request passes these stages, each in a file of its own:
//
//  1. The connection: connguard.go wraps the listener so that the read
//     deadlines fasthttp sets per read cost one system call per change that
//     matters, and tls.go terminates TLS with hot-reloaded certificates.
//  2. The front middleware (front.go) gives every request its ID and state
//     (request.go), recovers a handler's panic as an internal error, runs the
//     error handler (errors.go) so that it sees the status sent, and closes
//     a connection whose request body may still be unread on it.
//  3. The route table (app.go) is the contract: each row names the method,
//     the path, the policy operation, the body limits and the timeout, and
//     GET /v1/api and the OpenAPI document (openapi.go) publish it.
//     Authentication (auth.go, proxy.go for identities forwarded by a
//     trusted proxy), policies (policy.go) and rate limits (ratelimit.go)
//     run before the handler.
//  4. The handlers do the domain work: handlers_data.go (encrypt, decrypt,
//     rewrap, data keys as JSON, one item or a batch, with the fast JSON
//     decoder of fastjson.go), stream.go (the same routes as streamed
//     bodies), handlers_keys.go (key management), handlers_ops.go (health,
//     readiness, version) and speed.go with speed_page.go (GET /speed).
//  5. The request ends in accesslog.go: one access line per request, which
//     carries the audit record of the request's cryptographic operation, and
//     metrics.go counts it; metrics_expo.go renders GET /metrics.
//
// server.go holds the lifecycle (start-up self-test and benchmark, keystore,
// drain on shutdown) and config.go the configuration with its validation.
package server
