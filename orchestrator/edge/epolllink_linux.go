//go:build linux

package edge

import (
	"bytes"
	"errors"
	"syscall"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/edgelink"
	"github.com/mapyard/mapyard/mapserver/kernel/rawio"
)

// Link commands of the engine (pollCmd.op).
const (
	cmdAddLink = iota + 1
	cmdOpen
	cmdAdopt
	cmdCloseStream
	cmdMoved
)

// addLink hands lk's descriptor to the engine; false once the engine has stopped.
func (ep *epollEngine) addLink(lk *linkConn) bool {
	if ep.send(pollCmd{op: cmdAddLink, link: lk}) {
		return true
	}
	syscall.Close(lk.fd)
	lk.p.dropLink(lk)
	return false
}

// openStream asks the engine to open st on its link; the map's answer arrives on st.hs.
func (ep *epollEngine) openStream(st *linkStream) bool {
	return ep.send(pollCmd{op: cmdOpen, stream: st})
}

// closeStream asks the engine to end st (and tell the map); safe from any goroutine.
func (ep *epollEngine) closeStream(st *linkStream) { ep.send(pollCmd{op: cmdCloseStream, stream: st}) }

// adoptStream hands the client of st, whose 101 is written, to the engine, with the
// bytes the client sent before it. From then on the engine ends s. On an error the
// client is closed and s ended.
func (ep *epollEngine) adoptStream(st *linkStream, s *splice, early []byte) error {
	ts, sock := tlsOf(s.client)
	fd, err := dupConn(sock)
	s.mu.Lock()
	s.ep, s.ls = ep, st
	s.mu.Unlock()
	took := false
	s.closeOnce.Do(func() {
		took = true
		if ts != nil && err == nil {
			ts.release()
		} else {
			s.client.Close()
		}
	})
	switch {
	case err == nil && !took:
		syscall.Close(fd)
		err = errAdoptClosed
	case err == nil && ep.send(pollCmd{op: cmdAdopt, stream: st, splice: s, fd: fd, early: early, tls: ts}):
		return nil
	case err == nil:
		syscall.Close(fd)
		err = errors.New("the engine has stopped")
	}
	ep.closeStream(st)
	s.ended(0, 0)
	return err
}

// linkCommand runs one of the link commands.
func (ep *epollEngine) linkCommand(c pollCmd, now int64) {
	st := c.stream
	switch c.op {
	case cmdAddLink:
		lk := c.link
		ep.links[int32(lk.fd)] = lk
		lk.events = syscall.EPOLLIN
		ev := syscall.EpollEvent{Events: lk.events, Fd: int32(lk.fd)}
		lk.p.Metrics.link(1)
		if err := syscall.EpollCtl(ep.epfd, syscall.EPOLL_CTL_ADD, lk.fd, &ev); err != nil {
			ep.endLink(lk)
		}
	case cmdOpen:
		lk := st.lk
		if lk.dead {
			ep.endStream(st)
			return
		}
		lk.next++
		st.id, st.last = lk.next, now
		lk.streams[st.id] = st
		ep.record(lk, edgelink.KindOpen, st.id, st.req)
		st.req = nil
	case cmdAdopt:
		st.s = c.splice
		if st.closed {
			syscall.Close(c.fd)
			c.splice.ended(0, 0)
			return
		}
		st.fd, st.last = c.fd, now
		if st.tls = c.tls; st.tls != nil && len(st.pending) > 0 {
			// What the map sent before the client was adopted waits as plaintext.
			sealed, ok := ep.seal(st.tls, st.pending)
			if !ok {
				ep.endStream(st)
				return
			}
			st.pending = append(st.pending[:0:0], sealed...)
		}
		ep.clients[int32(st.fd)] = st
		st.evs = syscall.EPOLLIN
		ev := syscall.EpollEvent{Events: st.evs, Fd: int32(st.fd)}
		if err := syscall.EpollCtl(ep.epfd, syscall.EPOLL_CTL_ADD, st.fd, &ev); err != nil {
			ep.endStream(st)
			return
		}
		if len(c.early) > 0 && !st.mapClosed {
			st.up += int64(len(c.early))
			ep.record(st.lk, edgelink.KindData, st.id, c.early)
		}
		if len(st.pending) > 0 {
			ep.flushClient(st, now)
		} else if st.mapClosed {
			ep.drainClient(st, now)
		}
		if st.tls != nil && !st.closed {
			ep.pumpClient(st, syscall.EPOLLIN, now) // what the session read before the engine took it
		}
	case cmdCloseStream:
		ep.endStream(st)
	case cmdMoved:
		ep.moved(st, c.link, now)
	}
}

// pumpLink handles the readiness ev of lk: records waiting are written, records read
// are passed on. The link is read until the map's socket is empty, up to
// maxLinkReads reads: a snapshot round of a crowd is hundreds of kilobytes, and read
// one buffer per pass, with passes paced a millisecond apart under load, its last
// clients (and a pong queued behind it) would wait several milliseconds more.
func (ep *epollEngine) pumpLink(lk *linkConn, ev uint32, now int64) {
	if ev&syscall.EPOLLERR != 0 {
		// A reset may come right behind the map's last records, its streams' close
		// frames among them (a map that exits with inputs unread): they are read and
		// passed on first, so that its players learn the map said goodbye.
		for reads := 0; reads < maxLinkReads && !lk.dead; reads++ {
			if _, ok := ep.readLink(lk, now); !ok {
				break
			}
		}
		if !lk.dead {
			ep.endLink(lk)
		}
		return
	}
	if ev&syscall.EPOLLOUT != 0 {
		ep.writeLink(lk, now)
	}
	if lk.dead || ev&(syscall.EPOLLIN|syscall.EPOLLHUP|syscall.EPOLLRDHUP) == 0 {
		return
	}
	for reads := 1; ; reads++ {
		full, ok := ep.readLink(lk, now)
		if !ok || !full {
			return
		}
		if reads == maxLinkReads {
			ep.more = true // still ready: polled again before the engine parks
			return
		}
	}
}

// maxLinkReads bounds the reads of one link in one pass (a megabyte), so that a map
// sending without pause cannot keep the engine from everything else.
const maxLinkReads = 16

// readLink makes one read of lk and passes on the whole records it completes. full
// says the read filled the buffer (the socket may hold more); ok is false when
// nothing more is to be read now: the socket is empty, or the link has ended.
func (ep *epollEngine) readLink(lk *linkConn, now int64) (full, ok bool) {
	if cap(lk.rbuf)-len(lk.rbuf) < linkReadSize/4 {
		lk.rbuf = append(make([]byte, 0, 2*cap(lk.rbuf)), lk.rbuf...)
	}
	free := lk.rbuf[len(lk.rbuf):cap(lk.rbuf)]
	n, e := rawio.Read(lk.fd, free)
	switch {
	case e == syscall.EAGAIN:
		return false, false
	case e != 0 || n == 0:
		lk.p.Log.Warn("link to map ended", "addr", lk.addr, "err", errnoErr(e))
		ep.endLink(lk)
		return false, false
	}
	buf := lk.rbuf[:len(lk.rbuf)+n]
	for len(buf) >= edgelink.HeaderSize && !lk.dead {
		h, err := edgelink.ParseHeader(buf)
		if err != nil {
			lk.p.Log.Warn("link to map broken", "addr", lk.addr, "err", err)
			ep.endLink(lk)
			return false, false
		}
		end := edgelink.HeaderSize + h.Len
		if len(buf) < end {
			if cap(lk.rbuf) < end {
				lk.rbuf = make([]byte, 0, end+linkReadSize)
			}
			break
		}
		ep.linkRecord(lk, h, buf[edgelink.HeaderSize:end], now)
		buf = buf[end:]
	}
	if lk.dead {
		return false, false
	}
	lk.rbuf = append(lk.rbuf[:0], buf...) // copy (or move) of the partial record
	return n == len(free), true
}

// errnoErr names e for a log line; zero is the end of the stream.
func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return errors.New("closed by the map")
	}
	return e
}

// linkRecord handles one record from the map.
func (ep *epollEngine) linkRecord(lk *linkConn, h edgelink.Header, payload []byte, now int64) {
	st := lk.streams[h.Stream]
	switch {
	case h.Kind == edgelink.KindOpen:
		lk.p.Log.Warn("link to map broken", "addr", lk.addr, "err", "the map opened a stream")
		ep.endLink(lk)
	case st == nil:
		// A stream the edge already ended.
	case h.Kind == edgelink.KindData && !st.answered && st.move != nil:
		ep.movedAnswer(st, payload, now)
	case h.Kind == edgelink.KindData && !st.answered:
		st.answered = true
		st.hs <- bytes.Clone(payload)
	case h.Kind == edgelink.KindData:
		st.down += int64(len(payload))
		st.last = now
		if lk.down != nil {
			lk.down.Add(float64(len(payload)))
		}
		ep.toClient(st, payload, now)
	case h.Kind == edgelink.KindClose:
		delete(lk.streams, h.Stream)
		ep.mapEndedStream(st, now)
	case h.Kind == edgelink.KindMove:
		delete(lk.streams, h.Stream)
		ep.moveStream(st, payload, now)
	}
}

// mapEndedStream ends st on the map's side, by its Close record or because its link ended:
// the client gets what the map sent it and then the end of its connection. When the
// map sent no close frame, the map is gone (or dropped the client without one): the
// close frame public.CloseMapGone follows the map's last frame. Should the map's
// bytes stop inside a frame (records carry whole frames from a map of this kit, but
// that is not the link's contract), nothing may follow them: the client's connection
// is dropped at once.
func (ep *epollEngine) mapEndedStream(st *linkStream, now int64) {
	st.mapClosed = true
	switch {
	case !st.answered:
		ep.endStream(st)
		return
	case !st.frames.closed && !st.frames.atBoundary():
		ep.endStream(st)
		return
	case !st.frames.closed:
		ep.toClient(st, mapGoneClose, now)
		if st.closed {
			return
		}
	}
	if st.fd >= 0 && len(st.pending) == 0 {
		ep.drainClient(st, now)
	}
}

// record appends a record to lk's output, written once the current batch of events
// is handled.
func (ep *epollEngine) record(lk *linkConn, kind byte, id uint32, payload []byte) {
	if lk.dead {
		return
	}
	lk.out = edgelink.AppendHeader(lk.out, kind, id, len(payload))
	lk.out = append(lk.out, payload...)
	if !lk.queued {
		lk.queued = true
		ep.dirty = append(ep.dirty, lk)
	}
}

// writeLinks writes what the batch of events queued for the maps, one write per link.
func (ep *epollEngine) writeLinks(now int64) {
	for i, lk := range ep.dirty {
		lk.queued = false
		ep.dirty[i] = nil
		if !lk.dead {
			ep.writeLink(lk, now)
		}
	}
	ep.dirty = ep.dirty[:0]
}

// writeLink writes lk's output; what the socket does not take waits for it to be
// writable again, up to maxLinkOut and the write timeout.
func (ep *epollEngine) writeLink(lk *linkConn, now int64) {
	if len(lk.out) == 0 {
		return
	}
	w, e := writeAll(lk.fd, lk.out)
	if e != 0 && e != syscall.EAGAIN {
		lk.p.Log.Warn("link to map failed", "addr", lk.addr, "err", e)
		ep.endLink(lk)
		return
	}
	lk.out = lk.out[:copy(lk.out, lk.out[w:])]
	want := uint32(syscall.EPOLLIN)
	switch {
	case len(lk.out) > maxLinkOut:
		lk.p.Log.Warn("link to map cut: the map does not read", "addr", lk.addr, "waiting", len(lk.out))
		ep.endLink(lk)
		return
	case len(lk.out) > 0:
		want |= syscall.EPOLLOUT
		if lk.outSince == 0 {
			lk.outSince = now
		}
	default:
		lk.outSince = 0
		if cap(lk.out) > 4*linkReadSize {
			lk.out = nil // a burst's buffer is not kept
		}
	}
	if want != lk.events {
		lk.events = want
		ev := syscall.EpollEvent{Events: want, Fd: int32(lk.fd)}
		if syscall.EpollCtl(ep.epfd, syscall.EPOLL_CTL_MOD, lk.fd, &ev) != nil {
			ep.endLink(lk)
		}
	}
}

// endLink closes lk: a client with a stream on it gets what the map sent it and then
// the end of its connection, as if its own connection to the map had ended. The proxy
// forgets lk first, so that a client told its map went away, which comes back at
// once, gets a new link rather than this dead one.
func (ep *epollEngine) endLink(lk *linkConn) {
	if lk.dead {
		return
	}
	lk.dead = true
	lk.p.dropLink(lk)
	if _, ok := ep.links[int32(lk.fd)]; ok {
		delete(ep.links, int32(lk.fd))
		lk.p.Metrics.link(-1)
	}
	syscall.Close(lk.fd)
	lk.out, lk.rbuf = nil, nil
	now := time.Now().UnixNano()
	for id, st := range lk.streams {
		delete(lk.streams, id)
		ep.mapEndedStream(st, now)
	}
}

// pumpClient handles the readiness ev of a stream's client.
func (ep *epollEngine) pumpClient(st *linkStream, ev uint32, now int64) {
	if ev&syscall.EPOLLERR != 0 {
		ep.endStream(st)
		return
	}
	if ev&(syscall.EPOLLOUT|syscall.EPOLLHUP) != 0 && len(st.pending) > 0 {
		ep.flushClient(st, now)
		if st.closed {
			return
		}
	}
	if ev&(syscall.EPOLLIN|syscall.EPOLLHUP|syscall.EPOLLRDHUP) == 0 {
		return
	}
	var data []byte
	tlsEnd := false
	if st.tls != nil {
		var ctl []byte
		var e syscall.Errno
		data, ctl, e, tlsEnd = ep.readTLS(st.tls, st.fd)
		if len(ctl) > 0 {
			ep.writeClient(st, ctl, now)
			if st.closed {
				return
			}
		}
		switch {
		case e == syscall.EAGAIN:
			return
		case e != 0 || len(data) == 0:
			ep.endStream(st) // the client is gone: the map is told
			return
		}
	} else {
		n, e := rawio.Read(st.fd, ep.scratch)
		switch {
		case e == syscall.EAGAIN:
			return
		case e != 0 || n == 0:
			ep.endStream(st) // the client is gone: the map is told
			return
		}
		if n == len(ep.scratch) {
			ep.more = true
		}
		data = ep.scratch[:n]
	}
	switch {
	case st.draining || st.mapClosed:
		// After the map's end: read and dropped.
	case st.move != nil:
		st.last = now
		ep.holdForMove(st, data)
	default:
		st.last = now
		st.up += int64(len(data))
		if st.lk.up != nil {
			st.lk.up.Add(float64(len(data)))
		}
		st.up2map.feed(data)
		ep.record(st.lk, edgelink.KindData, st.id, data)
	}
	if tlsEnd {
		ep.endStream(st) // the client ended its session after these bytes
	}
}

// toClient writes b to st's client, or keeps it while the client is not adopted yet
// or has not taken what came before. A client that leaves more than maxStreamPending
// unread is dropped.
func (ep *epollEngine) toClient(st *linkStream, b []byte, now int64) {
	st.frames.feed(b)
	if st.tls != nil {
		sealed, ok := ep.seal(st.tls, b)
		if !ok {
			ep.endStream(st)
			return
		}
		b = sealed
	}
	ep.writeClient(st, b, now)
}

// writeClient writes b, bytes ready for the client's socket (sealed, for a TLS
// client), or keeps them behind what waits for it; see toClient.
func (ep *epollEngine) writeClient(st *linkStream, b []byte, now int64) {
	if st.fd >= 0 && len(st.pending) == 0 {
		w, e := writeAll(st.fd, b)
		if e != 0 && e != syscall.EAGAIN {
			ep.endStream(st)
			return
		}
		if w == len(b) {
			return
		}
		b = b[w:]
		ep.pauses.Add(1)
	}
	if len(st.pending)+len(b) > maxStreamPending {
		st.lk.p.Log.Warn("dropping a client that does not read what its map sends", "waiting", len(st.pending)+len(b))
		st.lk.p.Metrics.slowDropped()
		ep.endStream(st)
		return
	}
	if len(st.pending) == 0 {
		st.since = now
	}
	st.pending = append(st.pending, b...)
	ep.watchClient(st)
}

// flushClient writes what waits for st's client; once all of it is written after the
// map ended the stream, the client's side is shut.
func (ep *epollEngine) flushClient(st *linkStream, now int64) {
	w, e := writeAll(st.fd, st.pending)
	if e != 0 && e != syscall.EAGAIN {
		ep.endStream(st)
		return
	}
	st.pending = st.pending[w:]
	if len(st.pending) > 0 {
		ep.watchClient(st)
		return
	}
	st.pending, st.since = nil, 0
	ep.watchClient(st)
	if st.mapClosed {
		ep.drainClient(st, now)
	}
}

// drainClient ends a stream the map ended, once everything it sent is written: the
// client's side is shut for writing and what it still sends is read and dropped until
// it closes or closeGrace passes, so that closing with unread input does not reset the
// connection before the client read the map's last frames.
func (ep *epollEngine) drainClient(st *linkStream, now int64) {
	if st.draining || st.fd < 0 {
		return
	}
	st.draining = true
	st.grace = now + int64(closeGrace)
	_ = syscall.Shutdown(st.fd, syscall.SHUT_WR)
}

// watchClient sets what the epoll set watches on st's client: input always, output
// while bytes wait for it.
func (ep *epollEngine) watchClient(st *linkStream) {
	if st.fd < 0 {
		return
	}
	want := uint32(syscall.EPOLLIN)
	if len(st.pending) > 0 {
		want |= syscall.EPOLLOUT
	}
	if want == st.evs {
		return
	}
	st.evs = want
	ev := syscall.EpollEvent{Events: want, Fd: int32(st.fd)}
	if syscall.EpollCtl(ep.epfd, syscall.EPOLL_CTL_MOD, st.fd, &ev) != nil {
		ep.endStream(st)
	}
}

// endStream ends st: the map is told unless it ended it, a handshake still waiting
// is answered with nothing, and an adopted client is closed and its splice ended.
func (ep *epollEngine) endStream(st *linkStream) {
	if st.closed {
		return
	}
	st.closed = true
	lk := st.lk
	if st.id != 0 && !st.mapClosed {
		delete(lk.streams, st.id)
		ep.record(lk, edgelink.KindClose, st.id, nil)
	}
	if !st.answered {
		st.answered = true
		close(st.hs)
	}
	st.pending = nil
	if st.fd >= 0 {
		delete(ep.clients, int32(st.fd))
		syscall.Close(st.fd)
		st.fd = -1
		st.s.ended(st.up, st.down)
	}
}

// linkTimeouts closes streams idle both ways for the idle timeout, whose client has
// not taken a write for the write timeout, or past their close grace, and links the
// map has not read from for the write timeout.
func (ep *epollEngine) linkTimeouts(now int64) {
	for _, st := range ep.clients {
		if ep.moveTimeouts(st, now) {
			continue
		}
		switch {
		case st.draining && now >= st.grace,
			!st.draining && now-st.last >= int64(ep.idle):
			ep.endStream(st)
		case st.since != 0 && now-st.since >= int64(ep.wto):
			st.lk.p.Log.Warn("dropping a client that took nothing its map sent for the write timeout", "waiting", len(st.pending))
			st.lk.p.Metrics.slowDropped()
			ep.endStream(st)
		}
	}
	for _, lk := range ep.links {
		if lk.outSince != 0 && now-lk.outSince >= int64(ep.wto) {
			lk.p.Log.Warn("link to map cut: the map does not read", "addr", lk.addr)
			ep.endLink(lk)
		}
	}
}

// closeLinks ends every link and stream when the engine stops.
func (ep *epollEngine) closeLinks() {
	for _, st := range ep.clients {
		ep.endStream(st)
	}
	for _, lk := range ep.links {
		ep.endLink(lk)
	}
}

// abandon undoes a link command queued when the engine stopped.
func (ep *epollEngine) abandon(c pollCmd) {
	switch c.op {
	case cmdAddLink:
		syscall.Close(c.link.fd)
		c.link.dead = true
		c.link.p.dropLink(c.link)
	case cmdOpen:
		if !c.stream.answered {
			c.stream.answered = true
			close(c.stream.hs)
		}
	case cmdAdopt:
		syscall.Close(c.fd)
		c.splice.ended(0, 0)
	}
}
