//go:build linux

package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/edgelink"
)

// A move carries a player's socket from a map's container to the next container of
// its instance (a live upgrade) without closing it. The map the player leaves ends its
// stream with a Move record on a frame boundary; the edge then opens a stream for the
// same client on a link to the container of the record's generation, drops that
// stream's 101 answer (the client switched protocols long ago), sends the hello the
// map built for it as the client's first message, and passes on the client's frames
// from the next whole frame: a frame the client had begun towards the old container is
// finished there (its rest dropped), never cut in two. Whatever fails (no route of the
// generation within edgelink.MoveWait, the link, a refused stream) ends with the
// map-gone close, and the client joins again.

// moveDeadline bounds a move from its record to the next container's answer.
const moveDeadline = edgelink.MoveWait + handshakeTimeout

// maxMoveHeld bounds the client bytes kept for the next container while a move is
// under way: a second or more of a playing client's inputs.
const maxMoveHeld = 64 << 10

// errMoveTarget is why a move found no container to go to.
var errMoveTarget = errors.New("no route of the generation the map named")

// moveStream starts moving st, whose map ended it with a Move record (payload).
func (ep *epollEngine) moveStream(st *linkStream, payload []byte, now int64) {
	var m edgelink.Move
	switch {
	case json.Unmarshal(payload, &m) != nil || m.Generation == "" || len(m.Hello) == 0:
		st.lk.p.Log.Warn("a map moved a player without saying where", "addr", st.lk.addr)
		ep.mapEndedStream(st, now)
		return
	case !st.answered || st.fd < 0 || !st.frames.atBoundary() || st.frames.closed:
		ep.mapEndedStream(st, now)
		return
	}
	st.move = &streamMove{hello: clientTextFrame(m.Hello), skip: !st.up2map.atBoundary(), started: now}
	p, instance := st.lk.p, st.instance
	go func() {
		lk, err := p.moveTarget(ep, instance, m.Generation)
		if err != nil {
			p.Log.Warn("player not moved to the next container", "instance", instance, "generation", m.Generation, "err", err)
		}
		ep.send(pollCmd{op: cmdMoved, stream: st, link: lk})
	}()
}

// moveTarget returns the link to the container of instanceID's generation, waiting up
// to edgelink.MoveWait for the route table to show it.
func (p *Proxy) moveTarget(ep *epollEngine, instanceID, generation string) (*linkConn, error) {
	if p.MoveTo == nil {
		return nil, errMoveTarget
	}
	addr, err := p.MoveTo(instanceID, generation)
	if err != nil {
		return nil, err
	}
	lk, err := p.linkTo(ep, addr, instanceID)
	if lk == nil && err == nil {
		err = errors.New("the next container does not serve links")
	}
	return lk, err
}

// moved carries on st's move once its target link is known (nil: none).
func (ep *epollEngine) moved(st *linkStream, lk *linkConn, now int64) {
	if st.closed || st.move == nil {
		return
	}
	if lk == nil || lk.dead {
		ep.moveFailed(st, now)
		return
	}
	st.lk = lk
	lk.next++
	st.id, st.answered, st.last = lk.next, false, now
	lk.streams[st.id] = st
	ep.record(lk, edgelink.KindOpen, st.id, st.openReq)
}

// movedAnswer takes the next container's answer to a moved stream: a 101 (dropped: the
// client is past it) lets the hello and the held frames through; anything else fails
// the move.
func (ep *epollEngine) movedAnswer(st *linkStream, answer []byte, now int64) {
	st.answered = true
	mv := st.move
	if !bytes.HasPrefix(answer, []byte("HTTP/1.1 101 ")) {
		st.lk.p.Log.Warn("the next container refused a moved player", "instance", st.instance)
		ep.moveFailed(st, now)
		return
	}
	st.move = nil
	ep.record(st.lk, edgelink.KindData, st.id, append(mv.hello, mv.held...))
	st.up += int64(len(mv.held))
	st.lk.p.Metrics.moved(true, time.Duration(now-mv.started))
}

// moveFailed ends a move that cannot be made: a stream opened on the next container is
// closed there, and the client gets the map-gone close (the map's bytes stopped on a
// frame boundary) and joins again.
func (ep *epollEngine) moveFailed(st *linkStream, now int64) {
	if st.lk.streams[st.id] == st {
		delete(st.lk.streams, st.id)
		ep.record(st.lk, edgelink.KindClose, st.id, nil)
	}
	st.move = nil
	st.lk.p.Metrics.moved(false, 0)
	ep.mapEndedStream(st, now)
}

// holdForMove keeps what the client sent during a move, from its next whole frame.
func (ep *epollEngine) holdForMove(st *linkStream, b []byte) {
	mv := st.move
	if mv.skip {
		b = b[st.up2map.finish(b):]
		if !st.up2map.atBoundary() {
			return
		}
		mv.skip = false
	}
	st.up2map.feed(b)
	if len(mv.held)+len(b) > maxMoveHeld {
		st.lk.p.Log.Warn("dropping a client that sent too much while it moved", "held", len(mv.held)+len(b))
		ep.endStream(st)
		return
	}
	mv.held = append(mv.held, b...)
}

// moveTimeouts fails moves that did not end within moveDeadline.
func (ep *epollEngine) moveTimeouts(st *linkStream, now int64) bool {
	if st.move == nil || now-st.move.started < int64(moveDeadline) {
		return false
	}
	ep.moveFailed(st, now)
	return true
}

// clientTextFrame frames msg as one final text frame a client sends: masked, as
// RFC 6455 requires of a client, with a zero key (the bytes stay as they are).
func clientTextFrame(msg []byte) []byte {
	b := []byte{0x81}
	switch n := len(msg); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= 0xFFFF:
		b = append(b, 0x80|126, byte(n>>8), byte(n))
	default:
		b = append(b, 0x80|127, 0, 0, 0, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	b = append(b, 0, 0, 0, 0)
	return append(b, msg...)
}
