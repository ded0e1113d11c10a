//go:build linux

package edge

import (
	"syscall"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/rawio"
)

// The epoll engine's client/map pairs: a player forwarded on a connection of its own
// to its map (a map that serves no link, or EDGE_MAP_LINK=off), both sockets in the
// engine's epoll set, bytes copied each way as they come (epoll_linux.go has the
// engine; epolllink_linux.go the players on links).

// register adds pp's sockets to the epoll set, level-triggered, watching for input.
func (ep *epollEngine) register(pp *pollPair, now int64) {
	ep.pairs[pp] = struct{}{}
	pp.last = now
	for i := range pp.side {
		sd := &pp.side[i]
		ep.fds[int32(sd.fd)] = pp
		sd.events = syscall.EPOLLIN
		ev := syscall.EpollEvent{Events: sd.events, Fd: int32(sd.fd)}
		if err := syscall.EpollCtl(ep.epfd, syscall.EPOLL_CTL_ADD, sd.fd, &ev); err != nil {
			pp.closeReq = true
		}
	}
}

// pump handles the readiness ev of pp's side: bytes waiting to be written to it are
// written, bytes to read from it are read and passed on. It closes pp when it is done
// or failed.
func (ep *epollEngine) pump(pp *pollPair, side int, ev uint32, now int64) {
	if pp.closed {
		return
	}
	if pp.closeReq {
		ep.finish(pp)
		return
	}
	if ev&syscall.EPOLLERR != 0 {
		if side == 1 && !pp.dir[1].eof {
			// A reset may come right behind the map's last bytes, its close frame
			// among them (a map that exits with its players' inputs unread): those
			// bytes are read and passed on first, so that a map that said goodbye is
			// not taken for a map gone. The read that meets the reset ends the side.
			// Bytes still waiting for the client do not stop these reads: what is
			// read is queued behind them, as the socket will not be readable again.
			for range maxReadsBeforeReset {
				if pp.dir[1].eof || pp.closed {
					break
				}
				read := ep.copyDir
				if len(pp.dir[1].pending) > 0 {
					read = ep.queueBehind
				}
				if !read(pp, 1, now) {
					ep.finish(pp)
					return
				}
			}
			if pp.dir[1].eof || ep.mapEndedPair(pp, true, now) {
				return // the client is told: the map's close frame, or the map gone
			}
		}
		ep.finish(pp)
		return
	}
	if ev&(syscall.EPOLLOUT|syscall.EPOLLHUP) != 0 {
		if !ep.flush(pp, 1-side, now) {
			ep.finish(pp)
			return
		}
	}
	if ev&(syscall.EPOLLIN|syscall.EPOLLHUP|syscall.EPOLLRDHUP) != 0 {
		if pp.dir[side].eof && ev&syscall.EPOLLHUP != 0 {
			ep.finish(pp) // the side is shut both ways
			return
		}
		if !ep.copyDir(pp, side, now) {
			ep.finish(pp)
			return
		}
	}
	if pp.dir[0].eof && pp.dir[1].eof {
		ep.finish(pp)
	}
}

// maxReadsBeforeReset bounds the reads of a reset map side's last bytes (pump).
const maxReadsBeforeReset = 16

// queueBehind reads the map side (i, 1) once while bytes wait for the client, and
// queues what it read behind them: the last bytes of a reset map side (pump), which
// are written once those are. The read that meets the reset or the end ends the side.
func (ep *epollEngine) queueBehind(pp *pollPair, i int, now int64) bool {
	d := &pp.dir[i]
	n, e := rawio.Read(pp.side[i].fd, ep.scratch)
	switch {
	case e == syscall.EAGAIN:
		return ep.mapEndedPair(pp, true, now) // the reset is all that is left
	case e != 0 || n <= 0:
		return ep.mapEndedPair(pp, e != 0, now)
	}
	out, ok := ep.took(pp, i, ep.scratch[:n], now)
	if !ok {
		return false
	}
	d.pending = append(d.pending, out...)
	return true
}

// took counts data, read from side i, and returns the bytes to pass on: the map's
// (i, 1) are followed frame by frame and, for a TLS client, sealed. It returns false
// when sealing fails, which ends the pair.
func (ep *epollEngine) took(pp *pollPair, i int, data []byte, now int64) ([]byte, bool) {
	d := &pp.dir[i]
	d.total += int64(len(data))
	pp.last = now
	if d.counter != nil {
		d.counter.Add(float64(len(data)))
	}
	if i != 1 {
		return data, true
	}
	pp.s.frames.feed(data)
	if pp.tls == nil {
		return data, true
	}
	return ep.seal(pp.tls, data)
}

// copyDir reads side i once and writes what it read to the other side; bytes the
// other side does not take wait in a pooled buffer, and side i is not read again
// until they are written. A client speaking TLS is read and written through its
// session (epolltls_linux.go): what is counted, followed and passed to the map is its
// plaintext. It returns false on an error that ends the pair.
func (ep *epollEngine) copyDir(pp *pollPair, i int, now int64) bool {
	src, dst, d := &pp.side[i], &pp.side[1-i], &pp.dir[i]
	if d.eof || len(d.pending) > 0 {
		return true
	}
	var data []byte
	var e syscall.Errno
	tlsEnd := false
	if i == 0 && pp.tls != nil {
		var ctl []byte
		data, ctl, e, tlsEnd = ep.readTLS(pp.tls, src.fd)
		if len(ctl) > 0 && !ep.sendClient(pp, ctl, now) {
			return false
		}
	} else {
		var n int
		n, e = rawio.Read(src.fd, ep.scratch)
		data = ep.scratch[:max(n, 0)]
	}
	switch {
	case e == syscall.EAGAIN:
		return true
	case i == 1 && (e != 0 || len(data) == 0):
		return ep.mapEndedPair(pp, e != 0, now)
	case e != 0:
		return false
	case len(data) > 0 && dst.off:
		pp.last = now
		return true // the map is gone: what the client still sends is dropped
	case len(data) == 0:
		return ep.sourceEnded(pp, i, now)
	}
	out, ok := ep.took(pp, i, data, now)
	if !ok {
		return false
	}
	w, e := writeAll(dst.fd, out)
	if e != 0 && e != syscall.EAGAIN {
		if i == 0 && !pp.dir[1].eof {
			return ep.mapEndedPair(pp, true, now) // the map's connection failed
		}
		return false
	}
	if w < len(out) {
		d.pbuf = ep.bufs.Get().(*[]byte)
		d.pending = append((*d.pbuf)[:0], out[w:]...)
		d.since = now
		ep.pauses.Add(1)
		// A TLS client that ended after these bytes: flush reads it again once they
		// are written, and its session answers its end at once.
		return ep.watch(pp, i) && ep.watch(pp, 1-i)
	}
	if tlsEnd {
		return ep.sourceEnded(pp, i, now)
	}
	if pp.tls == nil || i == 1 {
		if len(data) == len(ep.scratch) {
			ep.more = true
		}
	}
	return true
}

// sourceEnded passes the end of side i on to the other side (TCP half-close) and
// gives the other direction its close grace.
func (ep *epollEngine) sourceEnded(pp *pollPair, i int, now int64) bool {
	pp.dir[i].eof = true
	_ = syscall.Shutdown(pp.side[1-i].fd, syscall.SHUT_WR)
	if pp.grace == 0 {
		pp.grace = now + int64(closeGrace)
	}
	return ep.watch(pp, i)
}

// sendClient writes b, bytes ready for the client's socket (sealed, for a TLS
// client), behind whatever already waits for it.
func (ep *epollEngine) sendClient(pp *pollPair, b []byte, now int64) bool {
	d := &pp.dir[1]
	if len(d.pending) > 0 {
		d.pending = append(d.pending, b...)
		return true
	}
	w, e := writeAll(pp.side[0].fd, b)
	switch {
	case e != 0 && e != syscall.EAGAIN:
		return false
	case w == len(b):
		return true
	}
	d.pbuf = ep.bufs.Get().(*[]byte)
	d.pending = append((*d.pbuf)[:0], b[w:]...)
	d.since = now
	return ep.watch(pp, 1) && ep.watch(pp, 0)
}

// flush writes what waits for direction i to its destination; when all of it is
// written, the source is read again. It returns false on an error.
func (ep *epollEngine) flush(pp *pollPair, i int, now int64) bool {
	d := &pp.dir[i]
	if len(d.pending) == 0 {
		return true
	}
	w, e := writeAll(pp.side[1-i].fd, d.pending)
	if e != 0 && e != syscall.EAGAIN {
		return false
	}
	d.pending = d.pending[w:]
	if len(d.pending) > 0 {
		return true
	}
	ep.bufs.Put(d.pbuf)
	d.pbuf, d.pending, d.since = nil, nil, 0
	if d.eof {
		// The source ended while its last bytes waited (mapEndedPair): their end is
		// passed on now that they are written.
		_ = syscall.Shutdown(pp.side[1-i].fd, syscall.SHUT_WR)
	}
	if !ep.watch(pp, i) || !ep.watch(pp, 1-i) {
		return false
	}
	return ep.copyDir(pp, i, now)
}

// mapEndedPair handles the end of pp's map side (failed says by an error, such as a
// reset, rather than the map's end of stream) and returns false when pp is to close
// at once. When the client had not ended first and the map sent no close frame, the
// map is gone: the client gets the close frame public.CloseMapGone after every byte
// of the map's, its side is then shut for writing, and the map's socket leaves the
// epoll set (a reset socket is always ready); the pair ends when the client answers
// or at its close grace. A map that stopped inside a frame leaves nothing to do but
// drop the client's connection: a close frame would be read as the rest of that
// frame. Otherwise the end is passed on as any side's end is, and an error closes
// the pair.
func (ep *epollEngine) mapEndedPair(pp *pollPair, failed bool, now int64) bool {
	d, f := &pp.dir[1], &pp.s.frames
	gone := !pp.dir[0].eof && !f.closed
	// A map that said goodbye and was then reset, its close frame still waiting for
	// the client behind other bytes, ends as if by its end of stream: what waits is
	// written, then the client's side is shut (flush).
	said := !gone && failed && f.closed && len(d.pending) > 0 && !pp.dir[0].eof
	switch {
	case gone && !f.atBoundary(), !gone && failed && !said:
		return false
	}
	d.eof = true
	if pp.grace == 0 {
		pp.grace = now + int64(closeGrace)
	}
	client := pp.side[0].fd
	if said {
		ep.unwatchMap(pp) // a reset socket is always ready
		return ep.watch(pp, 0)
	}
	if !gone {
		_ = syscall.Shutdown(client, syscall.SHUT_WR)
		return ep.watch(pp, 1)
	}
	f.closed = true
	ep.unwatchMap(pp)
	closing := mapGoneClose
	if pp.tls != nil {
		var ok bool
		if closing, ok = ep.seal(pp.tls, mapGoneClose); !ok {
			return false
		}
	}
	if len(d.pending) == 0 {
		w, e := writeAll(client, closing)
		if e != 0 && e != syscall.EAGAIN {
			return false
		}
		if w == len(closing) {
			_ = syscall.Shutdown(client, syscall.SHUT_WR)
			return ep.watch(pp, 0)
		}
		d.pbuf = ep.bufs.Get().(*[]byte)
		d.pending, d.since = (*d.pbuf)[:0], now
		d.pending = append(d.pending, closing[w:]...)
	} else {
		d.pending = append(d.pending, closing...)
	}
	return ep.watch(pp, 0) // output: flush writes the rest and then shuts the side
}

// unwatchMap takes pp's map side out of the epoll set, for good.
func (ep *epollEngine) unwatchMap(pp *pollPair) {
	if sd := &pp.side[1]; !sd.off {
		sd.off, sd.events = true, 0
		_ = syscall.EpollCtl(ep.epfd, syscall.EPOLL_CTL_DEL, sd.fd, nil)
	}
}

// watch sets what the epoll set watches for on pp's side j: input while its
// direction is neither ended nor paused, output while bytes wait to be written to it.
func (ep *epollEngine) watch(pp *pollPair, j int) bool {
	var want uint32
	if !pp.dir[j].eof && len(pp.dir[j].pending) == 0 {
		want |= syscall.EPOLLIN
	}
	if len(pp.dir[1-j].pending) > 0 {
		want |= syscall.EPOLLOUT
	}
	sd := &pp.side[j]
	if want == sd.events || sd.off {
		return true
	}
	sd.events = want
	ev := syscall.EpollEvent{Events: want, Fd: int32(sd.fd)}
	return syscall.EpollCtl(ep.epfd, syscall.EPOLL_CTL_MOD, sd.fd, &ev) == nil
}

// writeAll writes b to fd until done or the socket is full (EAGAIN) and returns how
// much went.
func writeAll(fd int, b []byte) (int, syscall.Errno) {
	w := 0
	for w < len(b) {
		n, e := rawio.Write(fd, b[w:])
		if e != 0 {
			return w, e
		}
		w += n
	}
	return w, 0
}

// timeouts closes pairs idle both ways for the idle timeout, pairs whose destination
// has not taken a write for the write timeout, and pairs past their close grace.
func (ep *epollEngine) timeouts(now int64) {
	for pp := range ep.pairs {
		switch {
		case pp.grace != 0 && now >= pp.grace,
			pp.grace == 0 && now-pp.last >= int64(ep.idle),
			pp.dir[0].since != 0 && now-pp.dir[0].since >= int64(ep.wto),
			pp.dir[1].since != 0 && now-pp.dir[1].since >= int64(ep.wto):
			ep.finish(pp)
		}
	}
	ep.linkTimeouts(now)
	ep.writeLinks(now)
}

// finish closes pp's sockets and ends its splice.
func (ep *epollEngine) finish(pp *pollPair) {
	if pp.closed {
		return
	}
	pp.closed = true
	delete(ep.pairs, pp)
	for i := range pp.side {
		delete(ep.fds, int32(pp.side[i].fd))
		syscall.Close(pp.side[i].fd) // also leaves the epoll set
		if d := &pp.dir[i]; d.pbuf != nil {
			ep.bufs.Put(d.pbuf)
			d.pbuf, d.pending = nil, nil
		}
	}
	s := pp.s
	s.ended(pp.dir[0].total, pp.dir[1].total)
}

func (ep *epollEngine) closeAll() {
	for pp := range ep.pairs {
		ep.finish(pp)
	}
	ep.closeLinks()
	ep.mu.Lock()
	q := ep.queue
	ep.queue, ep.stopped = nil, true
	ep.mu.Unlock()
	for _, c := range q {
		switch {
		case c.op != 0:
			ep.abandon(c)
		case c.add && !c.pair.closed:
			ep.register(c.pair, time.Now().UnixNano())
			ep.finish(c.pair)
		}
	}
}
