//go:build !linux

package rawio

import (
	"errors"
	"net"
)

// Conn is raw socket I/O, which only Linux has: elsewhere New answers nil and callers
// use net.Conn.
type Conn struct{}

// New returns nil outside Linux: there is no raw path.
func New(net.Conn) *Conn { return nil }

var errUnsupported = errors.New("rawio: raw socket I/O is Linux only")

// Read is never called outside Linux (New answers nil).
func (*Conn) Read([]byte) (int, error) { return 0, errUnsupported }

// Write is never called outside Linux (New answers nil).
func (*Conn) Write([]byte) (int, error) { return 0, errUnsupported }

// Writev is never called outside Linux (New answers nil).
func (*Conn) Writev([][]byte) (int, error) { return 0, errUnsupported }
