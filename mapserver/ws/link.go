package ws

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/edgelink"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/rawio"
)

const (
	// linkReadBuffer is a link's read buffer: one read takes the inputs of hundreds of
	// players. A larger record is read through a buffer of its size, kept while needed.
	linkReadBuffer = 64 << 10
	// maxLinkPending bounds what a link holds that its socket did not take yet; an edge
	// that falls that far behind is cut off, which ends every stream on it.
	maxLinkPending = 16 << 20
	// linkBacklog is how much may wait for a slow edge before the streams' frames stop
	// moving into the link's output: they wait in each stream's own queue instead,
	// which drops that one client when it fills (two seconds of snapshots), as a
	// connection of its own whose socket filled would. An edge that falls behind for a
	// moment (a burst of joins, a busy core) then costs no one anything, and one that
	// stays behind loses clients one by one rather than the link at once.
	linkBacklog = 1 << 20
)

// linkSwitching is the answer to a link's upgrade.
const linkSwitching = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + edgelink.Protocol + "\r\n\r\n"

// ServeLink is the handler of GET edgelink.Path: it upgrades the edge's request to a link
// (see package link) and serves it on a goroutine of its own, its reader; the handler
// returns at once. Every stream of the link is served as a connection of its own
// would be, and counts as one in Active and Drain.
func (s *Server) ServeLink(w http.ResponseWriter, r *http.Request) {
	s.start()
	if r.Method != http.MethodGet || !httpkit.HeaderHasToken(r.Header, "Connection", "upgrade") || !httpkit.HeaderHasToken(r.Header, "Upgrade", edgelink.Protocol) {
		s.logger().Debug("link upgrade refused", "method", r.Method, "upgrade", r.Header.Get("Upgrade"))
		writeError(w, http.StatusBadRequest, apierr.EBADREQUEST,
			"a link is GET "+edgelink.Path+" with Connection: Upgrade and Upgrade: "+edgelink.Protocol)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		writeError(w, http.StatusInternalServerError, apierr.EINTERNAL, "the connection cannot be taken over")
		return
	}
	nc, rw, err := hj.Hijack()
	if err != nil {
		s.logger().Debug("link hijack failed", "err", err)
		return
	}
	// What the edge sent after its request (records, already) was read with it.
	var early []byte
	if n := rw.Reader.Buffered(); n > 0 {
		b, _ := rw.Reader.Peek(n)
		early = append(early, b...)
	}
	_ = nc.SetDeadline(time.Now().Add(orDuration(s.WriteTimeout, DefaultWriteTimeout)))
	if _, err := io.WriteString(nc, linkSwitching); err != nil {
		nc.Close()
		return
	}
	_ = nc.SetDeadline(time.Time{})
	l := &edgeLink{
		s: s, nc: nc, raw: rawio.New(nc), remote: nc.RemoteAddr().String(),
		// The request's context ends when this handler returns; the link keeps its
		// values, not its end.
		ctx:     context.WithoutCancel(r.Context()),
		streams: make(map[uint32]*stream),
		iov:     make([][]byte, 1),
		move:    httpkit.HeaderHasToken(r.Header, edgelink.FeatureHeader, edgelink.FeatureMove),
	}
	l.log = s.logger().With("link", l.remote)
	s.Metrics.Links.Inc()
	l.log.Info("link opened", "move", l.move)
	go l.run(early)
}

// writeError answers a refused request with the JSON error envelope.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(errorBody(code, msg))
}

// edgeLink is one connection from the edge carrying many players' streams. Its reader
// (run) parses the records and serves each stream's frames; what the streams send is
// appended to out, one Data record per stream flush, and written with one write per
// flusher pass (or per read, for the replies it made), never one per stream.
type edgeLink struct {
	s      *Server
	nc     net.Conn
	raw    *rawio.Conn // the socket's non-blocking writev; nil: every write takes the slow path
	remote string
	log    *slog.Logger
	ctx    context.Context
	// move: the edge reads KindMove records (its request listed edgelink.FeatureMove).
	move bool

	mu      sync.Mutex
	streams map[uint32]*stream // nil once the link has ended

	// wmu orders every write, and guards the closeSent of every stream of the link.
	// While slow is set, drainSlow alone writes; records appended meanwhile wait in
	// out.
	wmu    sync.Mutex
	out    []byte // records not written yet
	spare  []byte // drainSlow's: the buffer it wrote last
	iov    [][]byte
	slow   bool
	failed bool // the link is closed: nothing is written any more

	inPass bool // the flusher's: the link is in its list of links to write

	// waiting are the streams whose frames stay in their queues while the output is
	// over linkBacklog; drainSlow schedules them again once it is written. Held: wmu.
	waiting []*stream

	// The reader's.
	touched []*stream // streams a read gave bytes to, for its replies
	rb      batch
}

// stream returns the stream id, or nil when it is unknown (never opened, or ended).
func (l *edgeLink) stream(id uint32) *stream {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.streams[id]
}

// forget takes an ended stream off the link.
func (l *edgeLink) forget(st *stream) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.streams[st.id] == st {
		delete(l.streams, st.id)
	}
}

// run reads the link until it ends, and then ends every stream on it. early is what
// was read with the upgrade request.
func (l *edgeLink) run(early []byte) {
	defer l.end()
	buf := make([]byte, max(linkReadBuffer, len(early)))
	n := copy(buf, early)
	for {
		var err error
		if len(early) == 0 {
			var m int
			m, err = l.nc.Read(buf[n:])
			n += m
		}
		early = nil
		off := 0
		for n-off >= edgelink.HeaderSize {
			h, perr := edgelink.ParseHeader(buf[off:n])
			if perr != nil {
				l.log.Warn("closing a link that broke its protocol", "err", perr)
				l.flushTouched()
				return
			}
			end := off + edgelink.HeaderSize + h.Len
			if end > n {
				break
			}
			l.record(h, buf[off+edgelink.HeaderSize:end])
			off = end
		}
		n = copy(buf, buf[off:n])
		// A record larger than the buffer gets a buffer of its size; the usual one
		// comes back once the large record is read.
		if n >= edgelink.HeaderSize {
			h, _ := edgelink.ParseHeader(buf[:n])
			if need := edgelink.HeaderSize + h.Len; need > len(buf) {
				buf = append(make([]byte, 0, need), buf[:n]...)[:need]
			}
		} else if len(buf) > linkReadBuffer {
			buf = append(make([]byte, 0, linkReadBuffer), buf[:n]...)[:linkReadBuffer]
		}
		l.flushTouched()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				l.log.Info("link read failed", "err", err)
			}
			return
		}
	}
}

// record handles one record of the edge.
func (l *edgeLink) record(h edgelink.Header, payload []byte) {
	switch h.Kind {
	case edgelink.KindOpen:
		l.open(h.Stream, payload)
	case edgelink.KindData:
		if st := l.stream(h.Stream); st != nil {
			st.feed(payload)
			if !st.touched {
				st.touched = true
				l.touched = append(l.touched, st)
			}
		}
	case edgelink.KindClose:
		if st := l.stream(h.Stream); st != nil {
			st.closedByEdge()
		}
	}
}

// flushTouched writes, after a read's records, what the streams they reached have
// queued (the replies they were answered with: pongs, errors, the responses to
// upgrades) with one write for every stream, as a connection of its own writes its
// replies from its reader (conn.replyNow): a pong does not wait for the flusher's next
// pass.
func (l *edgeLink) flushTouched() {
	var ended []*stream
	l.wmu.Lock()
	for i, st := range l.touched {
		st.touched = false
		l.touched[i] = nil
		if st.queued() > 0 && l.take(st, &l.rb) {
			ended = append(ended, st)
		}
	}
	l.touched = l.touched[:0]
	l.writeLocked()
	l.wmu.Unlock()
	for _, st := range ended {
		st.end()
	}
}

// take moves what st's lanes hold into the link's output, one Data record per batch
// of frames, until the output holds linkBacklog (the rest waits in the lanes, see
// wait), and reports whether the close frame went, followed by the stream's Close
// record, or the stream's Move record: the stream is then over, and the caller ends
// it. Held: wmu.
func (l *edgeLink) take(st *stream, b *batch) bool {
	for !st.closeSent && !l.failed {
		if l.wait(st) {
			return false
		}
		st.take(b)
		if b.size == 0 && !b.close {
			return false
		}
		if b.size > 0 {
			l.out = edgelink.AppendHeader(l.out, edgelink.KindData, st.id, b.size)
			for _, v := range b.iov {
				l.out = append(l.out, v...)
			}
			st.lastWrite.Store(time.Now().UnixNano())
		}
		switch {
		case b.move != nil:
			// A Data record holds whole frames, so the move follows a frame boundary.
			l.out = edgelink.AppendHeader(l.out, edgelink.KindMove, st.id, len(b.move))
			l.out = append(l.out, b.move...)
			return true
		case b.close:
			l.out = edgelink.AppendHeader(l.out, edgelink.KindClose, st.id, 0)
			return true
		}
	}
	return false
}

// wait reports whether the output holds linkBacklog or more, and if so keeps st to be
// scheduled again once the output is written (resume). Held: wmu.
func (l *edgeLink) wait(st *stream) bool {
	if len(l.out) < linkBacklog {
		return false
	}
	if !st.waiting {
		st.waiting = true
		l.waiting = append(l.waiting, st)
	}
	return true
}

// resume puts the streams that waited for the backlog into the flusher's next pass,
// once the output is written. Held: wmu.
func (l *edgeLink) resume() {
	for i, st := range l.waiting {
		st.waiting = false
		st.schedule()
		l.waiting[i] = nil
	}
	l.waiting = l.waiting[:0]
}

// writeOut writes the link's output.
func (l *edgeLink) writeOut() {
	l.wmu.Lock()
	l.writeLocked()
	l.wmu.Unlock()
}

// writeLocked writes the output with one non-blocking write; what the socket does not
// take is written by drainSlow. Output over maxLinkPending (drainSlow is stuck in a
// write while records pile up) closes the link. Held: wmu.
func (l *edgeLink) writeLocked() {
	if !l.failed && len(l.out) > maxLinkPending {
		l.fail(errors.New("the edge reads too slowly: over the pending bound"))
	}
	if l.failed || l.slow || len(l.out) == 0 {
		return
	}
	var n int
	if l.raw != nil {
		var err error
		l.iov[0] = l.out
		n, err = l.raw.Writev(l.iov)
		l.iov[0] = nil
		if err != nil {
			l.fail(err)
			return
		}
	}
	if n == len(l.out) {
		l.out = l.out[:0]
		l.resume()
		return
	}
	l.out, l.slow = l.out[n:], true
	go l.drainSlow()
}

// drainSlow writes, with blocking writes bounded by the write timeout, what the socket
// did not take and what is appended meanwhile, until the output is empty. A write that
// fails or times out closes the link.
func (l *edgeLink) drainSlow() {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	timeout := orDuration(l.s.WriteTimeout, DefaultWriteTimeout)
	for !l.failed && len(l.out) > 0 {
		data := l.out
		l.out = l.spare[:0]
		l.wmu.Unlock()
		_ = l.nc.SetWriteDeadline(time.Now().Add(timeout))
		_, err := l.nc.Write(data)
		// The deadline bounds this write only: left set, it would fail every later
		// non-blocking write once it passed.
		_ = l.nc.SetWriteDeadline(time.Time{})
		l.wmu.Lock()
		if err != nil {
			l.fail(err)
			break
		}
		l.spare = data[:0]
	}
	l.slow = false
	l.resume()
}

// fail closes the link after a failed write: its reader wakes and ends every stream.
// Held: wmu.
func (l *edgeLink) fail(err error) {
	if l.failed {
		return
	}
	l.failed, l.out, l.spare = true, nil, nil
	l.log.Warn("closing a link", "err", err)
	l.nc.Close()
}

// end ends the link and every stream on it. Only the reader calls it, once.
func (l *edgeLink) end() {
	l.wmu.Lock()
	l.failed, l.out, l.spare = true, nil, nil
	l.wmu.Unlock()
	l.nc.Close()
	l.mu.Lock()
	streams := l.streams
	l.streams = nil
	l.mu.Unlock()
	for _, st := range streams {
		st.dropped.Store(true)
		st.closing.Store(true)
		st.end()
	}
	l.s.Metrics.Links.Dec()
	l.log.Info("link closed", "streams", len(streams))
}
