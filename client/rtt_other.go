//go:build !linux

package client

import "time"

const canPace = false

// minRTT is known on Linux only; elsewhere streams go unpaced.
func (c *earlyConn) minRTT() (time.Duration, bool) { return 0, false }
