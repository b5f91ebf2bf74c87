// Package server is cipherd's HTTP service: a fiber v2 app over a
// cryptosvc.Service, with the self-test, the benchmark and the cipher
// selection behind it. New builds it; Serve, ListenAndServe and Shutdown run
// it; App returns the fiber app for an embedding program to mount.
//
// # Request lifecycle
//
// The route table (routes, in app.go) is the contract: each row names the
// method, the path, the policy operation, the body limits (the JSON body,
// the items of a batch, ?verify=full's plaintext), the query parameters and
// their values, the timeout and the rate-limit cost. buildApp compiles it
// once (table.go), and every stage below that needs a request's row asks
// that one table, with the same function on the same bytes. A request
// passes these stages, each in a file of its own:
//
//  1. The connection: connguard.go wraps the listener so that the read
//     deadlines fasthttp sets per read cost one system call per change that
//     matters, and tls.go terminates TLS with hot-reloaded certificates.
//     headercheck.go looks at each request's headers and its row before any
//     of its body is read: it refuses bad header names, bodies over the
//     row's limit and ?verify=full streams over the row's plaintext limit at
//     once, lets a stream's first byte take the stream idle timeout, and
//     answers what fasthttp could not parse. The request target may be in
//     origin or absolute form (table.go's requestPath).
//  2. front.go is the app's one handler: it gives every request its ID and
//     state (request.go), finds its row (404 or 405 without one), runs it,
//     recovers a handler's panic as an internal error, runs the error
//     handler (errors.go) so that it sees the status sent, and closes a
//     connection whose request body may still be unread on it. fiber's own
//     router holds no route of cipherd's.
//  3. serve (route.go) applies the row before the handler runs: it refuses
//     unknown query parameters and values, refuses a client whose address
//     failed to authenticate too often (authlimit.go), authenticates the
//     caller (auth.go; jwt.go for JWTs of the configured issuers, with
//     their keys in jwks.go and the tokens verified in jwtcache.go;
//     proxy.go for identities forwarded by a trusted proxy), takes
//     the row's cost from the caller's rate limit (ratelimit.go), checks the
//     path's key name and the operation on that key against the caller's
//     policies (policy.go), refuses a body announced over the limit, and
//     gives the handler a context that ends at the row's deadline
//     (route_context.go). It hands the handler a call: the row, the key, the
//     caller and the request's state. GET /v1/api and the OpenAPI document
//     (openapi.go over openapi.json) are made from the same rows, with the
//     limits in force.
//  4. The handlers do the domain work, with the limits of their row:
//     handlers_data.go (encrypt, decrypt, rewrap, data keys as JSON, one
//     item or a batch: batch.go; strict JSON in strictjson.go, with the fast
//     decoders and encoders of fastjson_request.go and fastjson.go), stream.go
//     (the same routes as streamed bodies, bounded per identity by
//     streamlimit.go, and ?verify=full's buffers server-wide by
//     verifybuf.go), handlers_keys.go (key management), handlers_ops.go
//     (health, readiness, version, GET /v1/api and the OpenAPI document) and
//     speed.go (GET /speed and POST /speed/run: it measures the table, and
//     package server/speedview renders the JSON report and the page).
//  5. The request ends in accesslog.go: one access line per request, labelled
//     with its row's path, which carries the audit record of the request's
//     cryptographic operation, and metrics.go counts it; metrics_expo.go
//     renders GET /metrics, with the operators' metrics of metrics_ops.go
//     (the keystore's state, counts by identity, reloads, the TLS
//     certificate's expiry, audit write latency).
//
// A JSON encrypt runs front → serve → handleEncrypt → readDataRequest →
// cryptosvc.Service.Seal → sendResult, then record.
//
// server.go holds the lifecycle (start-up self-test and benchmark, the
// default key, background work, drain on shutdown; usage.go flushes the
// usage counted per key version) and config.go the configuration with its
// validation.
//
// # The keystore
//
// The server is handed its keystore, open, in Config.Keystore: any
// cryptosvc.Keystore (the file keystore, a keyring, PostgreSQL through
// cryptosvc/pgstore, cryptosvc.MemStore, or an embedder's own). It never
// opens or closes a store, and imports no store's package: the program
// that opened the store closes it after Shutdown, which returns once the
// server's background work on the store has ended. cipherd serve opens
// the store its settings name with package cryptosvc/keystore, which also
// serves the file keystore's online root-key rotation (cryptosvc/rootkey).
// What the server learns from the store it learns through optional
// interfaces: /readyz reports a store that is a cryptosvc.HealthReporter,
// and a store whose writes fail with cryptosvc.ErrReadOnly (a keyring) gets
// no default key.
package server
