//go:build race

package kernels

// raceEnabled reports whether the race detector is on; the random tests run
// fewer iterations under it, and allocation counts are not meaningful.
const raceEnabled = true
