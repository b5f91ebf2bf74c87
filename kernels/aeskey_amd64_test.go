//go:build amd64 && gc && !purego

package kernels

import (
	"bytes"
	"crypto/aes"
	"testing"
)

// The assembly key schedule and block encryption agree with crypto/aes for
// random keys and blocks, and the first round key is the key itself.
func TestAESScheduleAgainstStdlib(t *testing.T) {
	if !cpuHas("AES") {
		t.Skip("no AES-NI")
	}
	r := newRand(t)
	for i := 0; i < iterations(2000); i++ {
		for _, n := range []int{16, 32} {
			key := r.bytes(n)
			var s aesSchedule
			s.expand(key)
			if !bytes.Equal(s.rk[0][:], key[:16]) || n == 32 && !bytes.Equal(s.rk[1][:], key[16:]) {
				t.Fatalf("AES-%d: first round keys are not the key", 8*n)
			}
			ref, _ := aes.NewCipher(key)
			var src, got, want [16]byte
			copy(src[:], r.bytes(16))
			s.encryptBlock(&got, &src)
			ref.Encrypt(want[:], src[:])
			if got != want {
				t.Fatalf("AES-%d key %x block %x: got %x, want %x", 8*n, key, src, got, want)
			}
		}
	}
}

// FIPS 197 appendix A.1 and A.3: the last round key of the example schedules.
func TestAESScheduleFIPS197(t *testing.T) {
	if !cpuHas("AES") {
		t.Skip("no AES-NI")
	}
	for _, tc := range []struct{ key, last string }{
		{"2b7e151628aed2a6abf7158809cf4f3c", "d014f9a8c9ee2589e13f0cc8b6630ca6"},
		{"603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4", "fe4890d1e6188d0b046df344706c631e"},
	} {
		var s aesSchedule
		s.expand(unhex(tc.key))
		if got := s.rk[s.rounds][:]; !bytes.Equal(got, unhex(tc.last)) {
			t.Errorf("key %s: last round key %x, want %s", tc.key, got, tc.last)
		}
	}
}
