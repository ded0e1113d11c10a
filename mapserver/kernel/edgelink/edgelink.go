// Package edgelink is the contract of a map's link: one connection from the edge to a map
// server that carries every player connection the edge forwards to that map, each as a
// stream of its own. Through one link, the map reads the inputs of hundreds of players
// with one system call and writes a whole snapshot round with another, where a
// connection per player costs a read and a wake-up per input and a write per snapshot
// on both sides of the hop.
//
// The link begins as an HTTP/1.1 request to Path on the map's game listener with
// "Connection: Upgrade" and "Upgrade: " + Protocol; the map answers 101 Switching
// Protocols with the same Upgrade header. From then on both sides send records: a
// header of HeaderSize bytes (kind, stream id and payload length, big-endian) and the
// payload.
//
// A stream carries, in its Data records, exactly the bytes a player's own connection
// to the map would carry: the edge opens it with the client's WebSocket upgrade request
// (KindOpen), the map answers with its HTTP response (101, or a refusal) and then
// WebSocket frames, and the edge passes on the client's frames as it reads them. The
// edge never parses a frame's payload; the map serves a stream as it serves a
// connection of its own (ticket, rate limits, keepalive, close handshake). The edge
// does follow the headers of the map's frames: a stream the map ends without its close
// frame (a Close record, or the link's end) gets the close code public.CloseMapGone
// from the edge, which it can only put between two frames: a map that writes whole
// frames in each Data record, as the kit's does, has every such player told.
//
// Stream ids are the edge's, non-zero and never reused on a link. Either side ends a
// stream with a Close record and then sends nothing more for it; the other side ends it
// too and does not answer. Records of a stream a side does not know (already ended) are
// ignored. A record with an unknown kind or a payload over MaxPayload is a protocol
// error: the receiver closes the link, which ends every stream on it.
package edgelink

import (
	"encoding/binary"
	"fmt"
)

// Path is the link's endpoint on a map's game listener.
const Path = "/link"

// Protocol is the Upgrade token of a link.
const Protocol = "mapyard-link/1"

// Record kinds.
const (
	// KindOpen (edge to map) opens a stream; its payload is the client's WebSocket
	// upgrade request as HTTP/1.1 bytes, as the edge would send it on a connection of
	// its own (public Host, X-Forwarded-For set by the edge).
	KindOpen byte = 1
	// KindData carries the stream's bytes, in order: from the edge, the client's
	// WebSocket frames; from the map, its HTTP response to the upgrade (whole, in the
	// stream's first Data record) and then WebSocket frames.
	KindData byte = 2
	// KindClose ends the stream. From the map it follows the stream's last bytes (its
	// close frame, or a refused upgrade's response): the edge closes the client's
	// connection once those are written. From the edge it says the client's
	// connection has ended or was dropped. Its payload is empty.
	KindClose byte = 3
)

// HeaderSize is the size of a record's header: kind (1 byte), stream id (4), payload
// length (4).
const HeaderSize = 9

// MaxPayload bounds one record's payload. A map writes a stream's queued frames as one
// record, at most 256 KiB of them; an edge writes what one read of a client returned.
const MaxPayload = 1 << 20

// AppendHeader appends a record header to dst.
func AppendHeader(dst []byte, kind byte, stream uint32, n int) []byte {
	dst = append(dst, kind)
	dst = binary.BigEndian.AppendUint32(dst, stream)
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

// PutHeader writes a record header into b[:HeaderSize].
func PutHeader(b []byte, kind byte, stream uint32, n int) {
	_ = b[HeaderSize-1]
	b[0] = kind
	binary.BigEndian.PutUint32(b[1:5], stream)
	binary.BigEndian.PutUint32(b[5:9], uint32(n))
}

// Header is a parsed record header.
type Header struct {
	Kind   byte
	Stream uint32
	Len    int
}

// ParseHeader reads the header at the start of b, which holds at least HeaderSize
// bytes. An unknown kind, a zero stream id or a payload over MaxPayload is an error.
func ParseHeader(b []byte) (Header, error) {
	h := Header{Kind: b[0], Stream: binary.BigEndian.Uint32(b[1:5])}
	n := binary.BigEndian.Uint32(b[5:9])
	switch {
	case h.Kind < KindOpen || h.Kind > KindClose:
		return h, fmt.Errorf("edgelink: unknown record kind %d", h.Kind)
	case h.Stream == 0:
		return h, fmt.Errorf("edgelink: record for stream 0")
	case n > MaxPayload:
		return h, fmt.Errorf("edgelink: record of %d bytes, over the %d limit", n, MaxPayload)
	}
	h.Len = int(n)
	return h, nil
}
