package mapserver

import "context"

// Close codes a map server ends a player connection with (RFC 6455 section 7.4).
const (
	// CloseNormal ends a connection that is done: idle, transferred, replaced by a
	// resumed one.
	CloseNormal = 1000
	// CloseGoingAway ends every connection when the map server stops.
	CloseGoingAway = 1001
	// ClosePolicy ends a connection whose handshake failed (no hello, a bad hello, a
	// ticket the orchestrator refused: the error frame before it says which), or that
	// went on sending over its rate limits (rate_limited).
	ClosePolicy = 1008
	// CloseInvalidPayload ends a connection that sent a text message that is not valid
	// UTF-8 (RFC 6455 section 8.1: the endpoint must fail the connection, with 1007).
	CloseInvalidPayload = 1007
	// CloseTooBig ends a connection that sent a message over the read limit, whether in
	// one frame or in fragments that add up to more.
	CloseTooBig = 1009
	// CloseTryAgain ends a connection the map cannot take yet (map_unavailable).
	CloseTryAgain = 1013
	// CloseReplaced ends a connection whose character a newer join took over (a second
	// tab, a reload): the error frame before it has code "replaced". A client that gets
	// it does not reconnect by itself, or two tabs would take the character from each
	// other forever.
	CloseReplaced = 4000
	// 4001 is the edge's (public.CloseMapGone: the map's side of a player's connection
	// ended without a close frame); a map never sends it.
)

// Peer is one player's connection as the game sees it, whatever carries it. Its methods
// never block and are safe for concurrent use.
type Peer interface {
	// Send queues one frame (binary or JSON text). False means the queue was full: the
	// connection is dropped, because a client that cannot keep up must never stall the
	// tick.
	Send(frame []byte, binary bool) bool
	// Reply queues a small JSON text frame (a pong, an error) ahead of the frames Send
	// queued and not yet written, so that it is never stuck behind a backlog of
	// snapshots. False means the connection is dropped, as for Send.
	Reply(frame []byte) bool
	// Close sends a close frame with code and reason after what is already queued, and
	// ends the connection.
	Close(code int, reason string)
	// Move hands the connection over to the next container of the map's instance (a
	// live upgrade) without closing it: after the frames already queued, whoever carries
	// the connection is told to open it again at generation and to send hello there as
	// the client's first message; the connection ends here without a close frame. It
	// returns false, having queued nothing, when the connection cannot move (a
	// WebSocket of its own, a link whose edge does not read moves) or is closing; the
	// caller then ends it another way.
	Move(generation string, hello []byte) bool
	// Remote names the other end, for logs.
	Remote() string
}

// Session is a connection after a successful hello. The transport calls Receive for
// every message, from the connection's one reader goroutine (never two calls at once),
// and Closed once when the connection has ended. Receive's data is valid only during
// the call: the transport reads the next message into the same buffer.
type Session interface {
	Receive(data []byte, binary bool)
	Closed()
}

// Handshaker admits a connection from its first message. It may take as long as
// redeeming a ticket through the orchestrator takes (it runs on the connection's reader,
// never on the tick). It returns nil after refusing the connection itself (an error
// frame and p.Close).
type Handshaker interface {
	Hello(ctx context.Context, first []byte, binary bool, p Peer) Session
}
