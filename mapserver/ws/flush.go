package ws

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mapyard/mapyard/mapserver"
)

// WebSocket opcodes of the frames the server writes (RFC 6455, section 5.2).
const (
	opText   = 0x1
	opBinary = 0x2
	opClose  = 0x8
	opPing   = 0x9
	opPong   = 0xA
	// opMove marks the end of a stream that moves (stream.Move) in its lanes. It is no
	// WebSocket opcode (those are four bits) and is never written as a frame: the link
	// writes a KindMove record in its place.
	opMove = 0x10
)

// Bounds of one flush of one connection: what one writev carries at most.
const (
	flushFrames = 64
	flushBytes  = 256 << 10
)

// flusher writes what the game queued for every connection, from one goroutine per
// Server. A snapshot round queues a frame for each of a thousand clients at once; with
// a writer goroutine per connection that round woke a thousand goroutines, each for one
// write, and kept a thousand idle stacks. The flusher is woken once, walks the
// connections that have frames, and writes each one's frames with one non-blocking
// writev. A connection whose socket does not take everything goes to a goroutine of its
// own until its backlog is written (conn.drainSlow), so no client ever stalls another.
type flusher struct {
	s      *Server
	notify chan struct{}
	// held, while a snapshot round encodes, keeps add from waking the flusher (see
	// Server.HoldWrites).
	held atomic.Bool

	mu    sync.Mutex
	dirty []writer

	spare []writer // the flusher goroutine's: the list swapped out last pass
	b     batch
	links []*edgeLink // the links this pass appended to, written after it
	ended []*stream   // the streams whose close frame this pass took
}

func newFlusher(s *Server) *flusher {
	return &flusher{s: s, notify: make(chan struct{}, 1)}
}

// add schedules c for the next pass.
func (f *flusher) add(c writer) {
	f.mu.Lock()
	f.dirty = append(f.dirty, c)
	f.mu.Unlock()
	if !f.held.Load() {
		f.wake()
	}
}

// wake starts a pass unless one is due already.
func (f *flusher) wake() {
	select {
	case f.notify <- struct{}{}:
	default:
	}
}

// HoldWrites keeps the connections' flusher asleep until ReleaseWrites: what is queued
// in between is written in one pass after it. The tick loop holds the writes while it
// encodes a snapshot round. On a map's one CPU the flusher would otherwise start on the
// round's first frames at once and share the processor with the rest of the encoding,
// so the round, and the tick after it, would last as long as encoding and writing
// together. Replies a reader writes itself (pongs) are not held.
func (s *Server) HoldWrites() { s.flusher.held.Store(true) }

// ReleaseWrites ends HoldWrites and wakes the flusher.
func (s *Server) ReleaseWrites() {
	s.flusher.held.Store(false)
	s.flusher.wake()
}

// sweeps is how many keepalive sweeps the flusher makes per idle timeout.
const sweeps = 8

// run is the flusher goroutine. Every sweep (an eighth of the idle timeout) it also
// pings the connections written nothing to for half the idle timeout, so that idle
// middleboxes keep them, and closes the streams idle for longer than the timeout.
func (f *flusher) run(sweep time.Duration) {
	tick := time.NewTicker(sweep)
	defer tick.Stop()
	for {
		select {
		case <-f.notify:
		case now := <-tick.C:
			f.s.keepalive(now, now.Add(-sweep*sweeps/2))
			continue
		}
		f.mu.Lock()
		list := f.dirty
		f.dirty = f.spare[:0]
		f.mu.Unlock()
		for i, c := range list {
			c.base().scheduled.Store(false)
			c.flushTo(f)
			list[i] = nil
		}
		f.spare = list[:0]
		f.writeLinks()
	}
}

// writeLinks writes, with one write each, the links the pass appended streams' frames
// to, then ends the streams whose close frame went. Ending one tells its session,
// which may wait for the tick: that is done on a goroutine of its own, never here.
func (f *flusher) writeLinks() {
	for i, l := range f.links {
		l.inPass = false
		l.writeOut()
		f.links[i] = nil
	}
	f.links = f.links[:0]
	if len(f.ended) > 0 {
		ended := f.ended
		f.ended = nil
		go func() {
			for _, st := range ended {
				st.end()
			}
		}()
	}
}

// batch is the scratch of one flush: the frames taken from a connection's lanes, as
// header and payload buffers for one writev.
type batch struct {
	hdr   []byte
	iov   [][]byte
	size  int
	close bool // the batch ends with the close frame, or with a move (move set)
	move  []byte
}

func (b *batch) reset() {
	b.hdr, b.iov, b.size, b.close, b.move = b.hdr[:0], b.iov[:0], 0, false, nil
}

// add appends one frame: its header (FIN set, no mask: server frames are never masked)
// and its payload.
func (b *batch) add(op byte, payload []byte) {
	start := len(b.hdr)
	b.hdr = append(b.hdr, 0x80|op)
	switch n := len(payload); {
	case n < 126:
		b.hdr = append(b.hdr, byte(n))
	case n <= 0xFFFF:
		b.hdr = append(b.hdr, 126)
		b.hdr = binary.BigEndian.AppendUint16(b.hdr, uint16(n))
	default:
		b.hdr = append(b.hdr, 127)
		b.hdr = binary.BigEndian.AppendUint64(b.hdr, uint64(n))
	}
	// hdr only grows by appending, so the header slices of earlier frames stay valid
	// even when appending moves hdr to a larger array.
	b.iov = append(b.iov, b.hdr[start:len(b.hdr):len(b.hdr)], payload)
	b.size += len(b.hdr) - start + len(payload)
}

// flatten copies the batch's bytes from byte skip on into one new slice.
func (b *batch) flatten(skip int) []byte {
	out := make([]byte, 0, b.size-skip)
	for _, v := range b.iov {
		if skip >= len(v) {
			skip -= len(v)
			continue
		}
		out = append(out, v[skip:]...)
		skip = 0
	}
	return out
}

// keepalive queues a ping for every connection written nothing to since before, and
// closes the streams whose client sent nothing for the idle timeout (a conn's read
// deadline does that for it). Sweeping every eighth of the timeout, a stream is closed
// after between the idle timeout and 9/8 of it, as a conn is.
func (s *Server) keepalive(now, before time.Time) {
	s.mu.Lock()
	idle := make([]*peer, 0, 16)
	var expired []*stream
	for c := range s.conns {
		if p := c.base(); p.lastWrite.Load() < before.UnixNano() {
			idle = append(idle, p)
		}
		if st, ok := c.(*stream); ok && st.idle(now) {
			expired = append(expired, st)
		}
	}
	s.mu.Unlock()
	for _, p := range idle {
		p.offer(opPing, nil)
	}
	for _, st := range expired {
		st.Close(mapserver.CloseNormal, "idle timeout")
	}
}
