package client

import (
	"testing"
	"time"
)

// waitDone runs p.wait and reports whether it returned within a minute.
func waitDone(p *pacer) bool {
	done := make(chan struct{})
	go func() {
		p.wait(nil)
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(time.Minute):
		return false
	}
}

func TestPacerWindow(t *testing.T) {
	p := newPacer()
	p.on = true // on every platform, for the arithmetic
	p.arm(200<<20, 100<<20, 10*time.Microsecond, true)
	if p.window != paceWindow || p.scale != 2 {
		t.Fatalf("window %d, scale %v; want %d, 2", p.window, p.scale, paceWindow)
	}
	p.read(paceWindow)
	if p.ahead() {
		t.Fatal("ahead at the window")
	}
	p.read(2)
	if !p.ahead() {
		t.Fatal("not ahead past the window")
	}
	p.answer(1) // two request bytes
	if p.ahead() {
		t.Fatal("ahead after the answer caught up")
	}
	p.read(1 << 20)
	go p.answer(1 << 19)
	if !waitDone(p) || p.ahead() || !p.on {
		t.Fatal("wait did not return when the answer caught up")
	}
}

func TestPacerArm(t *testing.T) {
	for _, tc := range []struct {
		name            string
		reqLen, respLen int64
		rtt             time.Duration
		rttOK, on       bool
		window          int64
	}{
		{"loopback", 1 << 30, 1 << 30, 8 * time.Microsecond, true, true, paceWindow},
		{"a millisecond away", 1 << 30, 1 << 30, time.Millisecond, true, true, paceRate / 1000},
		{"too far to pace", 1 << 30, 1 << 30, 20 * time.Millisecond, true, false, 0},
		{"unknown round trip", 1 << 30, 1 << 30, 0, false, false, 0},
		{"chunked answer", 1 << 30, -1, 8 * time.Microsecond, true, false, 0},
		{"chunked upload", -1, 1 << 30, 8 * time.Microsecond, true, false, 0},
	} {
		p := newPacer()
		p.on = true
		p.arm(tc.reqLen, tc.respLen, tc.rtt, tc.rttOK)
		if p.on != tc.on || (tc.on && p.window != tc.window) {
			t.Errorf("%s: on %v window %d; want %v %d", tc.name, p.on, p.window, tc.on, tc.window)
		}
	}
}

// An answer that does not move for the silence ends pacing; one that
// stops after pacing ended no longer holds the upload.
func TestPacerSilence(t *testing.T) {
	p := newPacer()
	p.on, p.silence = true, 10*time.Millisecond
	p.read(paceWindow + 1)
	if !waitDone(p) || p.on {
		t.Fatalf("after a silent answer: on %v", p.on)
	}
	p.read(10 * paceWindow)
	if p.ahead() {
		t.Fatal("ahead once pacing ended")
	}
}

// A stopped pacer, and a closed done channel, release a waiting upload.
func TestPacerStop(t *testing.T) {
	p := newPacer()
	p.on, p.silence = true, time.Hour
	p.read(2 * paceWindow)
	go p.stop()
	if !waitDone(p) || p.on {
		t.Fatal("stop did not release the wait")
	}
	p = newPacer()
	p.on, p.silence = true, time.Hour
	p.read(2 * paceWindow)
	done := make(chan struct{})
	close(done)
	p.wait(done)
	if p.on {
		t.Fatal("a done request left pacing on")
	}
}
