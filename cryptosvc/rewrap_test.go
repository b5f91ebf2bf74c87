package cryptosvc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
)

// TestRewrapStream: rewrapping a stream replaces its header alone; the new
// header opens the same body under the latest version, and the old header
// keeps opening until MinDecryptionVersion retires its version.
func TestRewrapStream(t *testing.T) {
	ctx := context.Background()
	for _, c := range SealAEADs {
		t.Run(c.String(), func(t *testing.T) {
			s, err := New(Config{Keystore: NewMemStore(), AEAD: c})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.CreateKey(ctx, tpKey, KeyConfig{}); err != nil {
				t.Fatal(err)
			}
			pt := tpRandom(ChunkSize + 77)
			old := tpSeal(t, s, tpKey, ModeEnvelope, pt)
			oneShot := tpSeal(t, s, tpKey, ModeDirect, pt)
			if _, err := s.RotateKey(ctx, tpKey); err != nil {
				t.Fatal(err)
			}

			re, info, err := s.Rewrap(ctx, tpKey, old, nil)
			if err != nil || info.Version != 2 || info.Mode != ModeEnvelope || info.AEAD != c {
				t.Fatalf("Rewrap: %+v, %v", info, err)
			}
			oh, on, err := ParseHeader(old)
			if err != nil {
				t.Fatal(err)
			}
			nh, nn, err := ParseHeader(re)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(re[nn:], old[on:]) {
				t.Errorf("the body changed")
			}
			if nh.KeyVersion != 2 || oh.KeyVersion != 1 || bytes.Equal(nh.WrappedKey, oh.WrappedKey) {
				t.Errorf("headers: old v%d, new v%d", oh.KeyVersion, nh.KeyVersion)
			}
			// The header alone rewraps to a header that fits the same body.
			hdr, _, err := s.Rewrap(ctx, tpKey, old[:on], nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, n, err := ParseHeader(hdr); err != nil || n != len(hdr) {
				t.Fatalf("rewrapped header alone: %d of %d bytes, %v", n, len(hdr), err)
			}
			reHdr := tpJoin(hdr, old[on:])

			mustOpen := func(what string, ct []byte, version uint32) {
				t.Helper()
				got, info, err := s.Open(ctx, tpKey, ct, tpContext)
				if err != nil || !bytes.Equal(got, pt) || info.Version != version {
					t.Errorf("%s: Open: v%d, %v", what, info.Version, err)
				}
				d, err := s.DecryptReader(ctx, tpKey, bytes.NewReader(ct), tpContext)
				if err != nil {
					t.Errorf("%s: DecryptReader: %v", what, err)
				} else if got, err := io.ReadAll(d); err != nil || !bytes.Equal(got, pt) {
					t.Errorf("%s: DecryptReader: %v", what, err)
				}
				ra, err := s.DecryptReaderAt(ctx, tpKey, bytes.NewReader(ct), int64(len(ct)), tpContext)
				if err != nil || ra.Size() != int64(len(pt)) {
					t.Errorf("%s: DecryptReaderAt: %v", what, err)
				}
			}
			mustFail := func(what string, ct []byte, want error) {
				t.Helper()
				if _, _, err := s.Open(ctx, tpKey, ct, tpContext); !errors.Is(err, want) {
					t.Errorf("%s: Open: %v; want %v", what, err, want)
				}
				if _, err := s.DecryptReader(ctx, tpKey, bytes.NewReader(ct), tpContext); !errors.Is(err, want) {
					t.Errorf("%s: DecryptReader: %v; want %v", what, err, want)
				}
				if _, err := s.DecryptReaderAt(ctx, tpKey, bytes.NewReader(ct), int64(len(ct)), tpContext); !errors.Is(err, want) {
					t.Errorf("%s: DecryptReaderAt: %v; want %v", what, err, want)
				}
			}
			mustOpen("rewrapped", re, 2)
			mustOpen("rewrapped header", reHdr, 2)
			mustOpen("old", old, 1)
			mustOpen("old one-shot", oneShot, 1)
			// A wrong context still fails after a rewrap: it binds the body.
			if _, _, err := s.Open(ctx, tpKey, re, []byte("other")); !errors.Is(err, ErrAuthFailed) {
				t.Errorf("rewrapped, wrong context: %v", err)
			}

			// A one-shot message is sealed again, which takes its context.
			reOne, info, err := s.Rewrap(ctx, tpKey, oneShot, tpContext)
			if err != nil || info.Version != 2 || info.Mode != ModeDirect {
				t.Fatalf("Rewrap one-shot: %+v, %v", info, err)
			}
			mustOpen("rewrapped one-shot", reOne, 2)
			if _, _, err := s.Rewrap(ctx, tpKey, oneShot, []byte("other")); !errors.Is(err, ErrAuthFailed) {
				t.Errorf("Rewrap one-shot with a wrong context: %v", err)
			}

			// Retire version 1.
			if _, err := s.ConfigureKey(ctx, tpKey, KeyConfig{MinDecryptionVersion: 2}); err != nil {
				t.Fatal(err)
			}
			mustFail("old, retired", old, ErrVersionRetired)
			mustFail("old one-shot, retired", oneShot, ErrVersionRetired)
			if _, _, err := s.Rewrap(ctx, tpKey, old, nil); !errors.Is(err, ErrVersionRetired) {
				t.Errorf("Rewrap of a retired header: %v; want %v", err, ErrVersionRetired)
			}
			mustOpen("rewrapped, after retiring v1", re, 2)
			mustOpen("rewrapped one-shot, after retiring v1", reOne, 2)

			// A rewrap under another key name is refused.
			if _, _, err := s.Rewrap(ctx, "other-key", re, nil); !errors.Is(err, ErrKeyMismatch) {
				t.Errorf("Rewrap under another name: %v; want %v", err, ErrKeyMismatch)
			}
		})
	}
}
