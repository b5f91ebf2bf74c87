//go:build linux && (amd64 || arm64)

package auditlog

import (
	"fmt"
	"io"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// aioSyncer makes a file's data durable, as fdatasync does, through Linux
// AIO (IOCB_CMD_FDSYNC), and waits for the completion on an eventfd that
// Go's network poller watches. A goroutine blocked in fdatasync holds its
// processor until sysmon takes it back, and keeps sysmon polling every
// 20 µs meanwhile: with GOMAXPROCS=1 the requests that wait for the next
// group cannot even be read during the sync. The waiting goroutine here
// parks instead (scripts/auditbench.sh: server CPU per request, records
// per sync). There is no maintained Go package for Linux AIO; the four
// system calls below are all it takes.
type aioSyncer struct {
	ctx   uintptr  // aio_context_t
	efd   *os.File // the eventfd, non-blocking, in the poller
	efdFD uint32
	cb    aioIOCB
	cbs   [1]*aioIOCB
	ev    [1]aioEvent
}

// aioIOCB is struct iocb on a little-endian machine; the fields an fsync
// leaves zero are blank.
type aioIOCB struct {
	_      uint64 // aio_data
	_      uint32 // aio_key
	_      uint32 // aio_rw_flags
	opcode uint16
	_      int16 // aio_reqprio
	fildes uint32
	_      uint64 // aio_buf
	_      uint64 // aio_nbytes
	_      int64  // aio_offset
	_      uint64 // aio_reserved2
	flags  uint32
	resfd  uint32
}

// aioEvent is struct io_event.
type aioEvent struct {
	_   uint64 // data
	_   uint64 // obj
	res int64
	_   int64 // res2
}

const (
	iocbCmdFdsync = 3
	iocbFlagResfd = 1 << 0
)

var _ [64 - unsafe.Sizeof(aioIOCB{})]struct{} // struct iocb is 64 bytes

func newAIOSyncer() (*aioSyncer, error) {
	var ctx uintptr
	if _, _, e := unix.Syscall(unix.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&ctx)), 0); e != 0 {
		return nil, fmt.Errorf("io_setup: %w", e)
	}
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Syscall(unix.SYS_IO_DESTROY, ctx, 0, 0)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	return &aioSyncer{ctx: ctx, efd: os.NewFile(uintptr(fd), "auditlog-aio"), efdFD: uint32(fd)}, nil
}

// sync makes f's written data durable. errAIOUnsupported means the kernel
// refused the request itself (a seccomp filter, a kernel without AIO
// fsync): fall back to fdatasync.
func (s *aioSyncer) sync(f *os.File) error {
	s.cb = aioIOCB{opcode: iocbCmdFdsync, fildes: uint32(f.Fd()), flags: iocbFlagResfd, resfd: s.efdFD}
	s.cbs[0] = &s.cb
	n, _, e := unix.Syscall(unix.SYS_IO_SUBMIT, s.ctx, 1, uintptr(unsafe.Pointer(&s.cbs[0])))
	if e != 0 || n != 1 {
		return fmt.Errorf("%w: io_submit: %v", errAIOUnsupported, e)
	}
	var count [8]byte
	if _, err := io.ReadFull(s.efd, count[:]); err != nil { // parks in the poller
		return fmt.Errorf("%w: waiting for the sync: %w", errAIOBroken, err)
	}
	var zero unix.Timespec // the completion is there: do not wait
	for {
		n, _, e = unix.Syscall6(unix.SYS_IO_GETEVENTS, s.ctx, 1, 1, uintptr(unsafe.Pointer(&s.ev[0])), uintptr(unsafe.Pointer(&zero)), 0)
		if e != syscall.EINTR {
			break
		}
	}
	switch {
	case e != 0:
		return fmt.Errorf("%w: io_getevents: %w", errAIOBroken, e)
	case n != 1:
		return fmt.Errorf("%w: the sync's completion is missing", errAIOBroken)
	case s.ev[0].res < 0:
		return syscall.Errno(-s.ev[0].res)
	}
	return nil
}

func (s *aioSyncer) close() {
	unix.Syscall(unix.SYS_IO_DESTROY, s.ctx, 0, 0)
	s.efd.Close()
}
