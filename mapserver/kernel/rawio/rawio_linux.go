package rawio

import (
	"io"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Conn reads or writes one socket with raw non-blocking system calls. Read and Write
// wait for readiness through the connection's own poller (so deadlines work as for
// net.Conn); Writev never waits. A Conn is not safe for concurrent use: make one per
// goroutine that uses the socket (the flusher of a connection, one direction of a
// splice).
type Conn struct {
	rc    syscall.RawConn
	buf   []byte
	iov   [][]byte // Writev's copy of the caller's, advanced past what was written
	n     int
	errno syscall.Errno
	err   error

	// The functions the poller calls back, bound once (on first use) so that no call
	// allocates.
	readFn, writeFn, writevFn func(uintptr) bool
}

// New returns the raw I/O of c, or nil when c exposes no file descriptor.
func New(c net.Conn) *Conn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return &Conn{rc: rc}
}

// Read reads into buf, waiting until the socket is readable. It returns io.EOF when the
// peer has closed its side, as net.Conn does.
func (c *Conn) Read(buf []byte) (int, error) {
	if c.readFn == nil {
		c.readFn = c.doRead
	}
	c.buf, c.n, c.errno = buf, 0, 0
	if err := c.rc.Read(c.readFn); err != nil {
		return 0, err
	}
	if c.errno != 0 {
		return 0, c.errno
	}
	if c.n == 0 {
		return 0, io.EOF
	}
	return c.n, nil
}

func (c *Conn) doRead(fd uintptr) bool {
	n, e := Read(int(fd), c.buf)
	if e == syscall.EAGAIN {
		return false // wait until readable
	}
	c.n, c.errno = n, e
	return true
}

// Write writes all of p, waiting while the socket's buffer is full.
func (c *Conn) Write(p []byte) (int, error) {
	if c.writeFn == nil {
		c.writeFn = c.doWrite
	}
	c.buf, c.n, c.errno = p, 0, 0
	if err := c.rc.Write(c.writeFn); err != nil {
		return c.n, err
	}
	if c.errno != 0 {
		return c.n, c.errno
	}
	return c.n, nil
}

func (c *Conn) doWrite(fd uintptr) bool {
	for c.n < len(c.buf) {
		n, e := Write(int(fd), c.buf[c.n:])
		switch e {
		case 0:
			c.n += n
		case syscall.EAGAIN:
			return false // wait until writable
		default:
			c.errno = e
			return true
		}
	}
	return true
}

// Writev makes one non-blocking writev of iov and returns the bytes the socket took,
// which may be none (its buffer is full) or part of what was given: a full buffer is a
// short write, never waited for.
func (c *Conn) Writev(iov [][]byte) (int, error) {
	if c.writevFn == nil {
		c.writevFn = c.doWritev
	}
	c.iov, c.n, c.err = append(c.iov[:0], iov...), 0, nil
	if err := c.rc.Write(c.writevFn); err != nil {
		return 0, err
	}
	clear(c.iov[:cap(c.iov)])
	return c.n, c.err
}

// doWritev runs under the socket's write lock. It returns true whatever happened, so
// the poller never waits.
func (c *Conn) doWritev(fd uintptr) bool {
	for len(c.iov) > 0 {
		n, err := unix.Writev(int(fd), c.iov)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			return true
		}
		if err != nil {
			c.err = err
			return true
		}
		c.n += n
		// A short write: skip what was written and try once more, the socket may
		// take the rest now.
		for len(c.iov) > 0 {
			if n >= len(c.iov[0]) { // whole (or empty) buffers written
				n -= len(c.iov[0])
				c.iov = c.iov[1:]
				continue
			}
			c.iov[0] = c.iov[0][n:]
			break
		}
	}
	return true
}

// Read is one read(2) on a non-blocking descriptor, retried on EINTR: what a poll loop
// that owns the descriptor calls when it is readable.
func Read(fd int, b []byte) (int, syscall.Errno) {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if e == syscall.EINTR {
			continue
		}
		return int(n), e
	}
}

// Write is one send(2) on a non-blocking descriptor, retried on EINTR, with
// MSG_NOSIGNAL: a peer that is gone is EPIPE, not a signal.
func Write(fd int, b []byte) (int, syscall.Errno) {
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
			syscall.MSG_NOSIGNAL, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		return int(n), e
	}
}
