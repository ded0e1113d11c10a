package ws

import (
	"encoding/binary"

	"github.com/mapyard/mapyard/mapserver"
)

// opContinuation is the opcode of a fragmented message's later frames.
const opContinuation = 0x0

// closeProtocolError is the close code of a client that breaks RFC 6455.
const closeProtocolError = 1002

// maxControlPayload bounds a control frame's payload (RFC 6455, section 5.5).
const maxControlPayload = 125

// frameError is a client frame a stream refuses: it is closed with code.
type frameError struct {
	code   int
	reason string
}

func protocolError(reason string) *frameError {
	return &frameError{code: closeProtocolError, reason: reason}
}

var errTooBig = &frameError{code: mapserver.CloseTooBig}

// errInvalidText is a text message that is not valid UTF-8.
var errInvalidText = &frameError{code: mapserver.CloseInvalidPayload, reason: invalidTextReason}

// feed parses the client's bytes as the edge passed them on: a frame may be split
// across records, and a record may hold several. What ends in the middle of a frame
// waits in partial for the next record. Only the link's reader calls it.
func (st *stream) feed(p []byte) {
	if st.broken {
		return
	}
	if len(st.partial) > 0 {
		st.partial = append(st.partial, p...)
		p = st.partial
	}
	for len(p) > 0 {
		n, err := st.frame(p)
		if err != nil {
			st.broken, st.partial, st.msg = true, nil, nil
			st.Close(err.code, err.reason)
			return
		}
		if st.broken { // a close frame: nothing after it is read
			st.partial, st.msg = nil, nil
			return
		}
		if n == 0 {
			break
		}
		p = p[n:]
	}
	// copy handles the overlap when p lies in partial already.
	st.partial = append(st.partial[:0], p...)
	if len(st.partial) == 0 && cap(st.partial) > readBufferSize {
		st.partial = nil // a large frame's room is not kept while the client idles
	}
}

// frame handles the frame at the start of p and returns its size, or 0 when p does
// not hold all of it yet. A client frame must be masked; a data frame that makes its
// message longer than the read limit closes the stream with 1009, as gorilla does on a
// connection of its own.
func (st *stream) frame(p []byte) (int, *frameError) {
	if len(p) < 2 {
		return 0, nil
	}
	fin, op := p[0]&0x80 != 0, p[0]&0x0F
	if p[0]&0x70 != 0 {
		return 0, protocolError("reserved bits set")
	}
	if p[1]&0x80 == 0 {
		return 0, protocolError("unmasked client frame")
	}
	n, h := uint64(p[1]&0x7F), 2
	switch n {
	case 126:
		if len(p) < 4 {
			return 0, nil
		}
		n, h = uint64(binary.BigEndian.Uint16(p[2:])), 4
	case 127:
		if len(p) < 10 {
			return 0, nil
		}
		n, h = binary.BigEndian.Uint64(p[2:]), 10
	}
	switch op {
	case opClose, opPing, opPong:
		if !fin || n > maxControlPayload {
			return 0, protocolError("bad control frame")
		}
	case opText, opBinary, opContinuation:
		if op == opContinuation && st.msgOp == 0 {
			return 0, protocolError("continuation frame outside a message")
		}
		if op != opContinuation && st.msgOp != 0 {
			return 0, protocolError("new message inside a fragmented one")
		}
		if n > uint64(st.s.readLimit())-uint64(len(st.msg)) {
			return 0, errTooBig
		}
	default:
		return 0, protocolError("unknown opcode")
	}
	h += 4 // the masking key
	if len(p) < h || uint64(len(p)-h) < n {
		return 0, nil
	}
	key, payload := p[h-4:h], p[h:h+int(n)]
	// The bytes are the reader's, and handled once: unmasked where they lie.
	for i := range payload {
		payload[i] ^= key[i&3]
	}
	switch {
	case op >= opClose:
		if err := st.control(op, payload); err != nil {
			return 0, err
		}
	case fin && op != opContinuation:
		// A whole message in one frame, the common case: handed on where it lies.
		if !validMessage(op, payload) {
			return 0, errInvalidText
		}
		st.message(payload, op == opBinary)
	default:
		st.msg = append(st.msg, payload...)
		if op != opContinuation {
			st.msgOp = op
		}
		if fin {
			// Checked whole: a character may be split across fragments.
			if !validMessage(st.msgOp, st.msg) {
				return 0, errInvalidText
			}
			st.message(st.msg, st.msgOp == opBinary)
			st.msg, st.msgOp = st.msg[:0], 0
		}
	}
	return h + int(n), nil
}

// control answers a ping with a pong and a close with a close frame, as a connection of
// its own does; pongs need nothing.
func (st *stream) control(op byte, payload []byte) *frameError {
	switch op {
	case opPing:
		st.offer(opPong, append([]byte(nil), payload...))
	case opClose:
		code := mapserver.CloseNormal
		switch {
		case len(payload) == 1:
			return protocolError("bad close frame")
		case len(payload) >= 2:
			code = int(binary.BigEndian.Uint16(payload))
			if !validCloseCode(code) {
				return protocolError("bad close code")
			}
		}
		st.broken = true // nothing after a close frame is read
		st.Close(code, "")
	}
	return nil
}

// validCloseCode reports whether a client may send code in a close frame (RFC 6455,
// section 7.4).
func validCloseCode(code int) bool {
	switch {
	case code >= 1000 && code <= 1014:
		return code != 1004 && code != 1005 && code != 1006
	default:
		return code >= 3000 && code <= 4999
	}
}
