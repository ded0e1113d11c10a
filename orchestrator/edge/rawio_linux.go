package edge

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// rawIO reads or writes one TCP connection of a splice with raw non-blocking system
// calls, waiting for readiness through the connection's own poller (so deadlines work
// as for net.Conn). net.Conn's Read and Write tell the Go scheduler about every system
// call; a loopback write can run long enough for the scheduler to hand the thread's
// processor to another thread, and a proxy that wakes for every small message then
// pays a thread switch per message. These calls never block, so the scheduler need
// not know. One rawIO serves one direction of one side; it is not safe for concurrent
// use.
type rawIO struct {
	rc      syscall.RawConn
	buf     []byte
	n       int
	errno   syscall.Errno
	readFn  func(uintptr) bool
	writeFn func(uintptr) bool
}

// newRawIO returns the fast path for c, or nil when c exposes no file descriptor.
func newRawIO(c net.Conn) connIO {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &rawIO{rc: rc}
	r.readFn, r.writeFn = r.doRead, r.doWrite
	return r
}

func (r *rawIO) read(buf []byte) (int, error) {
	r.buf, r.n, r.errno = buf, 0, 0
	if err := r.rc.Read(r.readFn); err != nil {
		return 0, err
	}
	if r.errno != 0 {
		return 0, r.errno
	}
	if r.n == 0 {
		return 0, io.EOF
	}
	return r.n, nil
}

func (r *rawIO) doRead(fd uintptr) bool {
	n, e := rawRead(int(fd), r.buf)
	if e == syscall.EAGAIN {
		return false // wait until readable
	}
	r.n, r.errno = n, e
	return true
}

func (r *rawIO) write(p []byte) error {
	r.buf, r.n, r.errno = p, 0, 0
	if err := r.rc.Write(r.writeFn); err != nil {
		return err
	}
	if r.errno != 0 {
		return r.errno
	}
	return nil
}

func (r *rawIO) doWrite(fd uintptr) bool {
	for r.n < len(r.buf) {
		n, e := rawWrite(int(fd), r.buf[r.n:])
		switch e {
		case 0:
			r.n += n
		case syscall.EAGAIN:
			return false // wait until writable
		default:
			r.errno = e
			return true
		}
	}
	return true
}

// rawRead is one read(2) on a non-blocking descriptor, retried on EINTR.
func rawRead(fd int, b []byte) (int, syscall.Errno) {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if e == syscall.EINTR {
			continue
		}
		return int(n), e
	}
}

// rawWrite is one send(2) on a non-blocking descriptor, retried on EINTR, with
// MSG_NOSIGNAL: a peer that is gone is EPIPE, not a signal.
func rawWrite(fd int, b []byte) (int, syscall.Errno) {
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
			syscall.MSG_NOSIGNAL, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		return int(n), e
	}
}
