//go:build !linux

package ws

import "net"

// rawConn makes one non-blocking writev on a socket (Linux only): elsewhere every
// write takes the slow path, a blocking write on a goroutine of its own.
type rawConn interface {
	writev(iov [][]byte) (int, error)
}

func newRawConn(net.Conn) rawConn { return nil }
