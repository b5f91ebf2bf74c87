// Package zaplog holds the zap pieces cmd/cipherd logs through: an encoder
// with a fast path for the server's access line (Encoder, Line) and a
// write-behind sink that keeps requests from waiting on a slow log reader
// (Sink). Both are byte for byte what zap's own JSON encoder and a direct
// write would produce; they differ only in cost, which
// server's BenchmarkLogEncoder and the sink's tests show.
package zaplog
