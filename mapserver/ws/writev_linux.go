package ws

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// rawConn makes one non-blocking writev on a socket. It returns the bytes the socket
// took, which may be none (its buffer is full) or part of what was given.
type rawConn interface {
	writev(iov [][]byte) (int, error)
}

type sysConn struct {
	rc  syscall.RawConn
	iov [][]byte // a copy of the caller's, advanced past what was written
	n   int
	err error
	fn  func(uintptr) bool
}

// newRawConn returns the non-blocking writer of c, or nil when c exposes no socket.
func newRawConn(c net.Conn) rawConn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	s := &sysConn{rc: rc}
	s.fn = s.do
	return s
}

func (s *sysConn) writev(iov [][]byte) (int, error) {
	s.iov, s.n, s.err = append(s.iov[:0], iov...), 0, nil
	if err := s.rc.Write(s.fn); err != nil {
		return 0, err
	}
	clear(s.iov[:cap(s.iov)])
	return s.n, s.err
}

// do runs under the socket's write lock. It returns true whatever happened: a full
// buffer (EAGAIN) is reported as a short write, never waited for.
func (s *sysConn) do(fd uintptr) bool {
	for len(s.iov) > 0 {
		n, err := unix.Writev(int(fd), s.iov)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			return true
		}
		if err != nil {
			s.err = err
			return true
		}
		s.n += n
		// A short write: skip what was written and try once more, the socket may
		// take the rest now.
		for len(s.iov) > 0 {
			if n >= len(s.iov[0]) { // whole (or empty) buffers written
				n -= len(s.iov[0])
				s.iov = s.iov[1:]
				continue
			}
			s.iov[0] = s.iov[0][n:]
			break
		}
	}
	return true
}
