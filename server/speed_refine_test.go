package server

import "time"

// The refined table's trials are 100 ms in service; here 2 ms, so that the
// tests that wait for it do not wait for a minute of measurements.
func init() { refineTrialTime = 2 * time.Millisecond }
