//go:build linux

package edge

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/mapyard/mapyard/mapserver/kernel/rawio"
)

// The epoll engine's players over TLS (docs/edge.md, "TLS in the event loop"). The
// engine copies bytes between sockets it reads and writes itself; a TLS session
// cannot be spliced that way, and the kernel's own TLS (kTLS) is neither reachable
// from crypto/tls nor built into every host's kernel. So the engine keeps the
// player's session (the *tls.Conn whose handshake the listener completed) and runs it
// in its own loop, over a transport that does no I/O (clientTransport in engine
// mode): one read of the socket per wake-up, handed to the session, gives the
// player's plaintext, and what goes to the player is sealed by the session and written
// with one write, as a plain socket's bytes are. The map's side, links included, is
// unchanged, and the player costs no goroutine.

// tlsSide is a player's TLS session in the engine.
type tlsSide struct {
	conn *tls.Conn
	tr   *clientTransport
	// buffered says the session may hold plaintext read before the engine took the
	// socket: the first read takes it even when the socket has nothing.
	buffered bool
	// ended says the session ended (the player's close_notify, or the socket's end).
	ended bool
}

// tlsOf returns c's TLS session when c is a connection of the edge's TLS listener,
// and the connection whose descriptor the engine takes: the TCP connection under the
// session, or c itself.
func tlsOf(c net.Conn) (*tlsSide, net.Conn) {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return nil, c
	}
	tr, ok := tc.NetConn().(*clientTransport)
	if !ok {
		return nil, c
	}
	return &tlsSide{conn: tc, tr: tr, buffered: true}, tr.Conn
}

// release closes the session's own descriptor (the engine works on a duplicate), which
// takes it out of Go's poller, and puts the transport in engine mode. The session
// itself is never closed: its close would send close_notify and end it for writing.
func (ts *tlsSide) release() {
	ts.tr.Conn.Close()
	ts.tr.engine = true
}

// readTLS reads the player's socket once and returns the plaintext of every record it
// completed, in the engine's plaintext buffer, valid until the next call. ctl is what
// the session itself has to say to the player meanwhile (the answer to a KeyUpdate,
// sealed). e is EAGAIN when no record was completed, another errno on an error of the
// socket or the session; end says the player ended the session after plain.
func (ep *epollEngine) readTLS(ts *tlsSide, fd int) (plain, ctl []byte, e syscall.Errno, end bool) {
	if ts.ended {
		return nil, nil, 0, true
	}
	n, e := rawio.Read(fd, ep.scratch)
	switch {
	case e == syscall.EAGAIN && !ts.buffered:
		return nil, nil, syscall.EAGAIN, false
	case e == syscall.EAGAIN:
	case e != 0:
		return nil, nil, e, false
	case n == 0:
		ts.tr.eof = true
	default:
		ts.tr.in = ep.scratch[:n]
		if n == len(ep.scratch) {
			ep.more = true
		}
	}
	ts.buffered = false
	out := ep.plain[:0]
	var err error
	for {
		if cap(out)-len(out) < maxTLSRecord {
			out = append(out, make([]byte, 2*maxTLSRecord)...)[:len(out)]
		}
		var m int
		m, err = ts.conn.Read(out[len(out):cap(out)])
		out = out[:len(out)+m]
		if err != nil {
			break
		}
	}
	ep.plain = out[:0]
	ts.tr.in = nil
	ctl, ts.tr.out = ts.tr.out, nil
	switch {
	case errors.Is(err, errWouldBlock):
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		ts.ended = true
	default:
		return nil, nil, syscall.EIO, false // a record that does not decrypt, an alert
	}
	if len(out) == 0 && !ts.ended {
		return nil, ctl, syscall.EAGAIN, false
	}
	return out, ctl, 0, ts.ended
}

// maxTLSRecord is room for one record's plaintext, which a read of the session is
// always given.
const maxTLSRecord = 16 << 10

// seal returns b sealed in TLS records for the player, in the engine's seal buffer,
// valid until the next call; false when the session can no longer write.
func (ep *epollEngine) seal(ts *tlsSide, b []byte) ([]byte, bool) {
	ts.tr.out = ep.sealed[:0]
	_, err := ts.conn.Write(b)
	out := ts.tr.out
	ts.tr.out = nil
	ep.sealed = out[:0]
	return out, err == nil
}
