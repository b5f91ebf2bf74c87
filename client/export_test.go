package client

import (
	"testing"
	"time"
)

// SetPaceSilence sets, for the rest of t, how long a paced upload waits for
// an answer that does not move before it goes on unpaced.
func SetPaceSilence(t testing.TB, d time.Duration) {
	old := paceSilence
	paceSilence = d
	t.Cleanup(func() { paceSilence = old })
}
