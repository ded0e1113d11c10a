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
	"encoding/json"
	"fmt"
	"time"
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
	// KindMove (map to edge) ends the stream on this link without ending the client's
	// connection: the map handed the player over to the next container of its
	// instance (a live upgrade). It follows the stream's last bytes, which end on a
	// frame boundary; its payload is a Move as JSON. The edge opens a new stream for
	// the client on a link to the container of Move.Generation (its route table's
	// route of that generation; it waits up to MoveWait for its table to have it),
	// drops that stream's 101 response, sends Move.Hello as the client's first message
	// (one masked text frame), then the client's frames from its next frame boundary
	// on. Where it cannot (no such route in time, a refused stream, the link down), it
	// closes the client's connection as after a map crash, and the client joins again.
	// A map sends it only on a link whose request carried FeatureHeader with
	// FeatureMove; an older edge is sent a transfer message instead.
	KindMove byte = 4
)

// FeatureHeader is the link request's header listing what the edge can do beyond the
// records every link has (comma-separated), so a map uses it only with an edge that
// reads it.
const FeatureHeader = "Mapyard-Link-Features"

// FeatureMove says the edge reads KindMove records.
const FeatureMove = "move"

// MoveWait bounds how long an edge waits for its route table to show the generation a
// player is moved to.
const MoveWait = 2 * time.Second

// Move is the payload of a KindMove record.
type Move struct {
	// Generation is the instance's container the player goes to.
	Generation string `json:"generation"`
	// Hello is the first message the edge sends there for the client: a hello with a
	// transfer token and the client's formats, built by the map the player leaves.
	Hello json.RawMessage `json:"hello"`
}

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
	case h.Kind < KindOpen || h.Kind > KindMove:
		return h, fmt.Errorf("edgelink: unknown record kind %d", h.Kind)
	case h.Stream == 0:
		return h, fmt.Errorf("edgelink: record for stream 0")
	case n > MaxPayload:
		return h, fmt.Errorf("edgelink: record of %d bytes, over the %d limit", n, MaxPayload)
	}
	h.Len = int(n)
	return h, nil
}
