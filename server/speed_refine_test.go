package server

import "time"

// The refined table's trials are 100 ms in service, in rounds 10 s apart;
// here 2 ms and 5 ms, so that the tests that wait for it do not wait for a
// minute of measurements.
func init() { refineTrialTime, refineRoundGap = 2*time.Millisecond, 5*time.Millisecond }
