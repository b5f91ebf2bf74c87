package client

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// canPace: streams are paced where minRTT is known.
const canPace = true

// minRTT returns the smallest round-trip time the kernel has seen on the
// connection, if it is a TCP connection.
func (c *earlyConn) minRTT() (time.Duration, bool) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	var gerr error
	err = rc.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	})
	if err != nil || gerr != nil {
		return 0, false
	}
	us := info.Min_rtt
	if us == 0 { // a kernel older than 4.10 leaves it out
		us = info.Rtt
	}
	return time.Duration(us) * time.Microsecond, us > 0
}
