//go:build linux

package edge

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/mapyard/mapyard/mapserver/kernel/rawio"
	"github.com/prometheus/client_golang/prometheus"
)

// loop is the event-loop engine: one goroutine owns every spliced connection pair
// after the handshake and copies bytes for all of them from one epoll set of its own.
// A wake-up then costs one goroutine wake-up and one epoll_wait for however many
// sockets became ready, instead of a goroutine wake-up per socket and direction.
// With one Go scheduler thread (GOMAXPROCS 1) the goroutine parks in Go's poller on
// the epoll descriptor itself: a goroutine blocked in epoll_wait would have the
// runtime's monitor take the only P from it at every wait and start another thread.
// With two or more, it blocks in epoll_wait itself (a system call the scheduler knows
// of): the monitor leaves a P in a system call alone for 10 ms while another is idle,
// so a wake-up is one epoll_wait instead of the poller's and then the loop's own.
//
// Sockets are level-triggered and watched for input only, so one read per message
// suffices (no read to EAGAIN). A direction reads its source only while nothing of it
// waits to be written: when the destination does not take a write (EAGAIN), the rest
// is kept in a pooled buffer, the source is no longer watched for input and the
// destination is watched for output; when it has taken the rest, the source is read
// again. So back-pressure reaches the sender and no byte is lost. Idle, write and close-grace timeouts are checked by a scan of all pairs
// a few times per shortest timeout.
type loop struct {
	epfd, wakefd int
	idle, wto    time.Duration
	bufs         *sync.Pool
	// blocking says the loop waits in epoll_wait itself rather than in Go's poller.
	blocking bool
	// batch is the least time between two passes while link traffic is busy (pace).
	batch time.Duration
	// passAt is when the current pass began (unix nanos); linkEvents counts the
	// events of link streams and links it handled.
	passAt     int64
	linkEvents int

	// pauses counts the times a destination did not take a whole write, so that a
	// source was paused.
	pauses atomic.Int64

	mu      sync.Mutex
	queue   []loopCmd
	stopped bool

	// Owned by the loop goroutine.
	fds   map[int32]*loopPair
	pairs map[*loopPair]struct{}
	// links and clients are the descriptors of links to maps and of the clients of
	// their streams (looplink_linux.go); dirty lists the links with records to write
	// once the current batch of events is handled.
	links   map[int32]*linkConn
	clients map[int32]*linkStream
	dirty   []*linkConn
	// more says a read filled the whole buffer: the socket, level-triggered, is
	// still ready, and the set is polled again before the loop parks.
	more    bool
	scratch []byte
	done    chan struct{}
}

type loopCmd struct {
	pair *loopPair
	add  bool
	// op, when set, is a link command (looplink_linux.go) on link or stream.
	op     int
	link   *linkConn
	stream *linkStream
	splice *splice
	fd     int
	early  []byte
}

// loopPair is one client/map connection pair; side 0 is the client, side 1 the map,
// and direction i copies from side i to side 1-i.
type loopPair struct {
	s      *splice
	side   [2]loopSide
	dir    [2]loopDir
	last   int64 // unix nanos of the last byte read from either side
	grace  int64 // when set, the pair closes at this time (one side ended)
	closed bool
	// closeReq is set by close from any goroutine; the loop closes the pair when it
	// sees it.
	closeReq bool
}

type loopSide struct {
	fd     int
	events uint32 // what the epoll set watches for on fd
}

type loopDir struct {
	pending []byte  // read from the source, not yet taken by the destination
	pbuf    *[]byte // the pooled buffer pending points into
	since   int64   // unix nanos since when pending waits
	total   int64   // bytes read from the source
	eof     bool    // the source ended
	counter prometheus.Counter
}

func newLoop(idle, wto, batch time.Duration, bufs *sync.Pool) (*loop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	if err := syscall.SetNonblock(epfd, true); err != nil {
		syscall.Close(epfd)
		return nil, fmt.Errorf("epoll set non-blocking: %w", err)
	}
	wfd, _, e := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if e != 0 {
		syscall.Close(epfd)
		return nil, fmt.Errorf("eventfd2: %w", e)
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(wfd)}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, int(wfd), &ev); err != nil {
		syscall.Close(epfd)
		syscall.Close(int(wfd))
		return nil, fmt.Errorf("epoll_ctl eventfd: %w", err)
	}
	l := &loop{
		epfd: epfd, wakefd: int(wfd), idle: idle, wto: wto, batch: batch, bufs: bufs, blocking: runtime.GOMAXPROCS(0) >= 2,
		fds: map[int32]*loopPair{}, pairs: map[*loopPair]struct{}{},
		links: map[int32]*linkConn{}, clients: map[int32]*linkStream{},
		scratch: make([]byte, BufferSize), done: make(chan struct{}),
	}
	go l.run()
	return l, nil
}

// errAdoptClosed says the splice was closed while it was being handed to the loop.
var errAdoptClosed = errors.New("connection closed during hand-off")

// adopt hands s's two connections to the loop: their descriptors are duplicated, the
// net.Conns closed (which takes them out of Go's poller), and from then on the loop
// owns them, counts their bytes and ends the splice (untrack, metrics). On an error s
// is unchanged, or its connections are already closed, and the caller copies with
// goroutines as before.
func (l *loop) adopt(s *splice) error {
	cfd, err := dupConn(s.client)
	if err != nil {
		return err
	}
	bfd, err := dupConn(s.backend)
	if err != nil {
		syscall.Close(cfd)
		return err
	}
	lp := &loopPair{s: s, last: time.Now().UnixNano()}
	lp.side[0].fd, lp.side[1].fd = cfd, bfd
	lp.dir[0].counter = s.p.Metrics.bytes(dirUp)
	lp.dir[1].counter = s.p.Metrics.bytes(dirDown)
	s.mu.Lock()
	s.lp, s.loop = lp, l
	s.mu.Unlock()
	took := false
	s.closeOnce.Do(func() {
		took = true
		s.client.Close()
		s.backend.Close()
	})
	if !took {
		s.mu.Lock()
		s.lp, s.loop = nil, nil
		s.mu.Unlock()
		syscall.Close(cfd)
		syscall.Close(bfd)
		return errAdoptClosed
	}
	if !l.send(loopCmd{pair: lp, add: true}) {
		syscall.Close(cfd)
		syscall.Close(bfd)
		s.ended(0, 0)
	}
	return nil
}

// dupConn returns a close-on-exec duplicate of c's descriptor, non-blocking.
func dupConn(c net.Conn) (int, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1, errors.New("connection has no descriptor")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	nfd := -1
	var derr error
	if err := rc.Control(func(fd uintptr) {
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_DUPFD_CLOEXEC, 0)
		if e != 0 {
			derr = e
			return
		}
		nfd = int(r)
	}); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, fmt.Errorf("dup: %w", derr)
	}
	if err := syscall.SetNonblock(nfd, true); err != nil {
		syscall.Close(nfd)
		return -1, err
	}
	return nfd, nil
}

// paused returns how often a source was paused for back-pressure.
func (l *loop) paused() int64 { return l.pauses.Load() }

// close asks the loop to close lp; safe from any goroutine.
func (l *loop) close(lp *loopPair) { l.send(loopCmd{pair: lp}) }

// send queues c for the loop and wakes it; false once the loop has stopped.
func (l *loop) send(c loopCmd) bool {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return false
	}
	l.queue = append(l.queue, c)
	l.mu.Unlock()
	l.wake()
	return true
}

func (l *loop) wake() {
	one := uint64(1)
	syscall.Write(l.wakefd, (*[8]byte)(unsafe.Pointer(&one))[:])
}

// stop ends the loop once its pairs are gone (Proxy.Close has closed them) and waits.
func (l *loop) stop() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
	l.wake()
	<-l.done
}

// tick is how often timeouts are checked: a quarter of the shortest one, within
// [10 ms, 1 s].
func (l *loop) tick() time.Duration {
	t := min(l.idle, l.wto, closeGrace) / 4
	return max(10*time.Millisecond, min(t, time.Second))
}

func (l *loop) run() {
	defer close(l.done)
	defer syscall.Close(l.wakefd)
	if l.blocking {
		l.runBlocking()
		return
	}
	// The epoll set is itself waited on through Go's poller: the loop goroutine parks
	// there while nothing is ready, so it needs no thread of its own, and a wake-up
	// for any number of ready sockets is one goroutine wake-up. All the work runs
	// inside the poller's callback, so that readiness that arrives meanwhile is kept
	// for the next wait rather than reset.
	f := os.NewFile(uintptr(l.epfd), "edge-epoll")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		l.closeAll()
		return
	}
	events := make([]syscall.EpollEvent, 256)
	tick := l.tick()
	next := time.Now().Add(tick)
	stop := false
	turn := func(uintptr) bool {
		for !stop {
			n := epollPoll(l.epfd, events)
			if n == 0 {
				return false
			}
			t := time.Now()
			now := t.UnixNano()
			if stop = l.dispatch(events[:n], now); stop {
				return true
			}
			if !t.Before(next) {
				l.timeouts(now)
				next = t.Add(tick)
			}
			if l.pace() {
				continue // events may wait: poll again
			}
			if n < len(events) && !l.more {
				return false // nothing known to wait: park until the set signals again
			}
		}
		return true
	}
	for !stop {
		_ = f.SetReadDeadline(next)
		if err := rc.Read(turn); err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				l.closeAll()
				return
			}
			now := time.Now()
			l.timeouts(now.UnixNano())
			next = now.Add(tick)
		}
	}
}

// runBlocking is run waiting in epoll_wait itself, at most until the next timeout
// scan; while a read filled its whole buffer it only polls.
func (l *loop) runBlocking() {
	defer syscall.Close(l.epfd)
	events := make([]syscall.EpollEvent, 256)
	tick := l.tick()
	next := time.Now().Add(tick)
	for {
		wait := 0
		if !l.more {
			wait = max(1, int((time.Until(next)+time.Millisecond-1)/time.Millisecond))
		}
		n, err := syscall.EpollWait(l.epfd, events, wait)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			l.closeAll()
			return
		}
		t := time.Now()
		now := t.UnixNano()
		l.more = false
		if n > 0 && l.dispatch(events[:n], now) {
			return
		}
		if !t.Before(next) {
			l.timeouts(now)
			next = t.Add(tick)
		}
		l.pace()
	}
}

// pace keeps passes over the ready sockets at least l.batch apart while the last pass
// handled two or more events of players on links: it sleeps out the rest of the
// batch time and says so. Under load a pass then handles every message that arrived
// meanwhile, with one wake-up of the loop and one write to each link (and so one
// read by each map) instead of one for every few messages; a game's inputs and
// snapshots, a tick (tens of ms) apart, wait at most the batch time more. A lone
// player's message is handled at once, as is all other traffic.
func (l *loop) pace() bool {
	if l.batch <= 0 || l.linkEvents < 2 {
		return false
	}
	rest := time.Duration(l.passAt + int64(l.batch) - time.Now().UnixNano())
	if rest <= 0 {
		return false
	}
	if l.blocking {
		// A thread of its own: it sleeps in the kernel, as it waits in epoll_wait,
		// without the scheduler's timers and hand-offs.
		ts := syscall.NsecToTimespec(int64(rest))
		for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
		}
		return true
	}
	time.Sleep(rest)
	return true
}

// dispatch handles one batch of events; true
// when the loop is to end.
func (l *loop) dispatch(events []syscall.EpollEvent, now int64) bool {
	l.more = false
	l.passAt, l.linkEvents = now, 0
	for i := range events {
		ev := &events[i]
		if int(ev.Fd) == l.wakefd {
			if l.commands(now) {
				return true
			}
			continue
		}
		// Clients of links first: with links, they are nearly every event.
		if st := l.clients[ev.Fd]; st != nil {
			l.linkEvents++
			l.pumpClient(st, ev.Events, now)
			continue
		}
		if lk := l.links[ev.Fd]; lk != nil {
			l.linkEvents++
			l.pumpLink(lk, ev.Events, now)
			continue
		}
		lp := l.fds[ev.Fd]
		if lp == nil || lp.closed {
			continue
		}
		side := 0
		if int(ev.Fd) == lp.side[1].fd {
			side = 1
		}
		l.pump(lp, side, ev.Events, now)
	}
	l.writeLinks(now)
	return false
}

// epollPoll returns the ready events without waiting (0 when none or interrupted).
func epollPoll(epfd int, events []syscall.EpollEvent) int {
	n, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])),
		uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0
	}
	return int(n)
}

// commands runs the queued adds and closes; true when the loop is to end.
func (l *loop) commands(now int64) bool {
	var buf [8]byte
	_, _ = syscall.Read(l.wakefd, buf[:])
	l.mu.Lock()
	q := l.queue
	l.queue = nil
	stopped := l.stopped
	l.mu.Unlock()
	for _, c := range q {
		switch {
		case c.op != 0:
			l.linkCommand(c, now)
		case c.add && c.pair.closeReq:
			l.register(c.pair, now)
			l.finish(c.pair)
		case c.add:
			l.register(c.pair, now)
			l.pump(c.pair, 0, syscall.EPOLLIN, now)
			l.pump(c.pair, 1, syscall.EPOLLIN, now)
		default:
			c.pair.closeReq = true
			if _, ok := l.pairs[c.pair]; ok {
				l.finish(c.pair)
			}
		}
	}
	if stopped {
		l.closeAll()
		return true
	}
	return false
}

// register adds lp's sockets to the epoll set, level-triggered, watching for input.
func (l *loop) register(lp *loopPair, now int64) {
	l.pairs[lp] = struct{}{}
	lp.last = now
	for i := range lp.side {
		sd := &lp.side[i]
		l.fds[int32(sd.fd)] = lp
		sd.events = syscall.EPOLLIN
		ev := syscall.EpollEvent{Events: sd.events, Fd: int32(sd.fd)}
		if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, sd.fd, &ev); err != nil {
			lp.closeReq = true
		}
	}
}

// pump handles the readiness ev of lp's side: bytes waiting to be written to it are
// written, bytes to read from it are read and passed on. It closes lp when it is done
// or failed.
func (l *loop) pump(lp *loopPair, side int, ev uint32, now int64) {
	if lp.closed {
		return
	}
	if lp.closeReq || ev&syscall.EPOLLERR != 0 {
		l.finish(lp)
		return
	}
	if ev&(syscall.EPOLLOUT|syscall.EPOLLHUP) != 0 {
		if !l.flush(lp, 1-side, now) {
			l.finish(lp)
			return
		}
	}
	if ev&(syscall.EPOLLIN|syscall.EPOLLHUP|syscall.EPOLLRDHUP) != 0 {
		if lp.dir[side].eof && ev&syscall.EPOLLHUP != 0 {
			l.finish(lp) // the side is shut both ways
			return
		}
		if !l.copyDir(lp, side, now) {
			l.finish(lp)
			return
		}
	}
	if lp.dir[0].eof && lp.dir[1].eof {
		l.finish(lp)
	}
}

// copyDir reads side i once and writes what it read to the other side; bytes the
// other side does not take wait in a pooled buffer, and side i is not read again
// until they are written. It returns false on an error that ends the pair.
func (l *loop) copyDir(lp *loopPair, i int, now int64) bool {
	src, dst, d := &lp.side[i], &lp.side[1-i], &lp.dir[i]
	if d.eof || len(d.pending) > 0 {
		return true
	}
	n, e := rawio.Read(src.fd, l.scratch)
	switch {
	case e == syscall.EAGAIN:
		return true
	case e != 0:
		return false
	case n == 0:
		d.eof = true
		_ = syscall.Shutdown(dst.fd, syscall.SHUT_WR)
		if lp.grace == 0 {
			lp.grace = now + int64(closeGrace)
		}
		return l.watch(lp, i)
	}
	d.total += int64(n)
	lp.last = now
	if d.counter != nil {
		d.counter.Add(float64(n))
	}
	w, e := writeAll(dst.fd, l.scratch[:n])
	if e != 0 && e != syscall.EAGAIN {
		return false
	}
	if w < n {
		d.pbuf = l.bufs.Get().(*[]byte)
		d.pending = append((*d.pbuf)[:0], l.scratch[w:n]...)
		d.since = now
		l.pauses.Add(1)
		return l.watch(lp, i) && l.watch(lp, 1-i)
	}
	if n == len(l.scratch) {
		l.more = true
	}
	return true
}

// flush writes what waits for direction i to its destination; when all of it is
// written, the source is read again. It returns false on an error.
func (l *loop) flush(lp *loopPair, i int, now int64) bool {
	d := &lp.dir[i]
	if len(d.pending) == 0 {
		return true
	}
	w, e := writeAll(lp.side[1-i].fd, d.pending)
	if e != 0 && e != syscall.EAGAIN {
		return false
	}
	d.pending = d.pending[w:]
	if len(d.pending) > 0 {
		return true
	}
	l.bufs.Put(d.pbuf)
	d.pbuf, d.pending, d.since = nil, nil, 0
	if !l.watch(lp, i) || !l.watch(lp, 1-i) {
		return false
	}
	return l.copyDir(lp, i, now)
}

// watch sets what the epoll set watches for on lp's side j: input while its
// direction is neither ended nor paused, output while bytes wait to be written to it.
func (l *loop) watch(lp *loopPair, j int) bool {
	var want uint32
	if !lp.dir[j].eof && len(lp.dir[j].pending) == 0 {
		want |= syscall.EPOLLIN
	}
	if len(lp.dir[1-j].pending) > 0 {
		want |= syscall.EPOLLOUT
	}
	sd := &lp.side[j]
	if want == sd.events {
		return true
	}
	sd.events = want
	ev := syscall.EpollEvent{Events: want, Fd: int32(sd.fd)}
	return syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_MOD, sd.fd, &ev) == nil
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
func (l *loop) timeouts(now int64) {
	for lp := range l.pairs {
		switch {
		case lp.grace != 0 && now >= lp.grace,
			lp.grace == 0 && now-lp.last >= int64(l.idle),
			lp.dir[0].since != 0 && now-lp.dir[0].since >= int64(l.wto),
			lp.dir[1].since != 0 && now-lp.dir[1].since >= int64(l.wto):
			l.finish(lp)
		}
	}
	l.linkTimeouts(now)
	l.writeLinks(now)
}

// finish closes lp's sockets and ends its splice.
func (l *loop) finish(lp *loopPair) {
	if lp.closed {
		return
	}
	lp.closed = true
	delete(l.pairs, lp)
	for i := range lp.side {
		delete(l.fds, int32(lp.side[i].fd))
		syscall.Close(lp.side[i].fd) // also leaves the epoll set
		if d := &lp.dir[i]; d.pbuf != nil {
			l.bufs.Put(d.pbuf)
			d.pbuf, d.pending = nil, nil
		}
	}
	s := lp.s
	s.ended(lp.dir[0].total, lp.dir[1].total)
}

func (l *loop) closeAll() {
	for lp := range l.pairs {
		l.finish(lp)
	}
	l.closeLinks()
	l.mu.Lock()
	q := l.queue
	l.queue, l.stopped = nil, true
	l.mu.Unlock()
	for _, c := range q {
		switch {
		case c.op != 0:
			l.abandon(c)
		case c.add && !c.pair.closed:
			l.register(c.pair, time.Now().UnixNano())
			l.finish(c.pair)
		}
	}
}
