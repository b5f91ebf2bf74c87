package zaplog

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// testLine is a Line whose plainness the test sets.
type testLine struct{ plain bool }

func (l *testLine) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("k", "v")
	return nil
}
func (l *testLine) Plain() bool                { return l.plain }
func (l *testLine) AppendJSON(b []byte) []byte { return append(b, `,"k":"v"`...) }

// TestEncoderFastPath checks when the fast path is taken: for a plain Line
// alone, never for a clone (which may carry context fields), and that zap's
// production settings are recognised.
func TestEncoderFastPath(t *testing.T) {
	e := NewEncoder(zap.NewProductionEncoderConfig()).(*encoder)
	l := &testLine{plain: true}
	if e.fastLine(zapcore.Entry{}, []zapcore.Field{zap.Inline(l)}) != l {
		t.Error("a plain line does not take the fast path")
	}
	l.plain = false
	if e.fastLine(zapcore.Entry{}, []zapcore.Field{zap.Inline(l)}) != nil {
		t.Error("a line that needs escaping takes the fast path")
	}
	if e.fastLine(zapcore.Entry{}, []zapcore.Field{zap.Inline(&testLine{plain: true}), zap.String("x", "y")}) != nil {
		t.Error("an entry with a second field takes the fast path")
	}
	if e.Clone().(*encoder).fastLine(zapcore.Entry{}, []zapcore.Field{zap.Inline(&testLine{plain: true})}) != nil {
		t.Error("a clone takes the fast path")
	}
	if !e.production {
		t.Error("zap's production settings are not recognised: the entry itself goes through zap")
	}
	dev := zap.NewProductionEncoderConfig()
	dev.EncodeTime = zapcore.ISO8601TimeEncoder
	if NewEncoder(dev).(*encoder).production {
		t.Error("another time encoder taken for the production one")
	}
}

// TestEncoderMatchesZap checks the fast path's output against zap's own
// encoder for the same entry.
func TestEncoderMatchesZap(t *testing.T) {
	cfg := zap.NewProductionEncoderConfig()
	ent := zapcore.Entry{Level: zap.InfoLevel, Message: "access"}
	for _, l := range []*testLine{{plain: true}, {plain: false}} {
		got, err := NewEncoder(cfg).EncodeEntry(ent, []zapcore.Field{zap.Inline(l)})
		if err != nil {
			t.Fatal(err)
		}
		want, err := zapcore.NewJSONEncoder(cfg).EncodeEntry(ent, []zapcore.Field{zap.Inline(l)})
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("plain=%v: got %s, want %s", l.plain, got, want)
		}
	}
}
