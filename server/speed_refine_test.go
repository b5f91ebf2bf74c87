package server

import (
	"testing"
	"time"

	"github.com/cipherd/cipherd/server/speedview"
)

// The refined table's trials are 100 ms in service, in rounds 10 s apart;
// here 2 ms and 5 ms, so that the tests that wait for it do not wait for a
// minute of measurements.
func init() { refineTrialTime, refineRoundGap = 2*time.Millisecond, 5*time.Millisecond }

// An operator's run during the start-up refinement takes its place: it
// answers with its own table at once, not 409 for as long as the
// refinement lasts.
func TestSpeedRunPreemptsRefinement(t *testing.T) {
	// Rounds an hour apart: the refinement stays in progress until stopped.
	defer func(gap time.Duration) { refineRoundGap = gap }(refineRoundGap)
	refineRoundGap = time.Hour
	ts := startTestServer(t, Config{})
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, body, _ := getSpeed(t, ts, "", "")
		if decodeSpeed(t, body).TableState == speedview.TableRefining {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the start-up refinement never showed: %s", body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	code, body, _ := postRun(t, ts, `{"seconds":0.001,"trials":1,"ciphers":["aes-128-gcm"],"sizes":[16]}`, "")
	if code != 200 {
		t.Fatalf("run during the refinement: %d %s", code, body)
	}
	v := decodeSpeed(t, body)
	if v.TableState != speedview.TableDone || v.TableSource != speedview.SourceAdmin {
		t.Errorf("after the operator's run: state %q, source %q; want %q, %q", v.TableState, v.TableSource, speedview.TableDone, speedview.SourceAdmin)
	}
	// The refinement does not come back to replace the operator's table.
	_, body, _ = getSpeed(t, ts, "", "")
	if v := decodeSpeed(t, body); v.TableState != speedview.TableDone || v.TableSource != speedview.SourceAdmin {
		t.Errorf("later: state %q, source %q; want %q, %q", v.TableState, v.TableSource, speedview.TableDone, speedview.SourceAdmin)
	}
	if n := ts.Logs.FilterMessage("refined speed table left for an operator's run; the quick table stays until it ends").Len(); n != 1 {
		t.Errorf("%d log lines of the refinement yielding, want 1", n)
	}
}
