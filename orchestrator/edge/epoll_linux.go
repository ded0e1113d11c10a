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

	"github.com/prometheus/client_golang/prometheus"
)

// epollEngine is the edge's default copy engine (EDGE_ENGINE=epoll): one goroutine owns
// every spliced connection pair after the handshake and copies bytes for all of them
// from one epoll set of its own.
// A wake-up then costs one goroutine wake-up and one epoll_wait for however many
// sockets became ready, instead of a goroutine wake-up per socket and direction.
// With one Go scheduler thread (GOMAXPROCS 1) the goroutine parks in Go's poller on
// the epoll descriptor itself: a goroutine blocked in epoll_wait would have the
// runtime's monitor take the only P from it at every wait and start another thread.
// With two or more, it blocks in epoll_wait itself (a system call the scheduler knows
// of): the monitor leaves a P in a system call alone for 10 ms while another is idle,
// so a wake-up is one epoll_wait instead of Go's poller's and then the engine's own.
//
// Sockets are level-triggered and watched for input only, so one read per message
// suffices (no read to EAGAIN). A direction reads its source only while nothing of it
// waits to be written: when the destination does not take a write (EAGAIN), the rest
// is kept in a pooled buffer, the source is no longer watched for input and the
// destination is watched for output; when it has taken the rest, the source is read
// again. So back-pressure reaches the sender and no byte is lost. Idle, write and
// close-grace timeouts are checked by a scan of all pairs a few times per shortest
// timeout.
type epollEngine struct {
	epfd, wakefd int
	idle, wto    time.Duration
	bufs         *sync.Pool
	// blocking says the engine waits in epoll_wait itself rather than in Go's poller.
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
	queue   []pollCmd
	stopped bool

	// Owned by the engine goroutine.
	fds   map[int32]*pollPair
	pairs map[*pollPair]struct{}
	// links and clients are the descriptors of links to maps and of the clients of
	// their streams (epolllink_linux.go); dirty lists the links with records to write
	// once the current batch of events is handled.
	links   map[int32]*linkConn
	clients map[int32]*linkStream
	dirty   []*linkConn
	// more says a read filled the whole buffer: the socket, level-triggered, is
	// still ready, and the set is polled again before the engine parks.
	more    bool
	scratch []byte
	// plain and sealed are the buffers of players' TLS sessions: the plaintext a read
	// completed, and what a write sealed (epolltls_linux.go).
	plain, sealed []byte
	done          chan struct{}
}

type pollCmd struct {
	pair *pollPair
	add  bool
	// op, when set, is a link command (epolllink_linux.go) on link or stream.
	op     int
	link   *linkConn
	stream *linkStream
	splice *splice
	fd     int
	early  []byte
	tls    *tlsSide // the client's TLS session, for cmdAdopt
}

// pollPair is one client/map connection pair; side 0 is the client, side 1 the map,
// and direction i copies from side i to side 1-i.
type pollPair struct {
	s      *splice
	tls    *tlsSide // the client's TLS session, when it speaks TLS
	side   [2]pollSide
	dir    [2]pollDir
	last   int64 // unix nanos of the last byte read from either side
	grace  int64 // when set, the pair closes at this time (one side ended)
	closed bool
	// closeReq is set by close from any goroutine; the engine closes the pair when it
	// sees it.
	closeReq bool
}

type pollSide struct {
	fd     int
	events uint32 // what the epoll set watches for on fd
	off    bool   // fd left the epoll set: a map that is gone (mapEndedPair)
}

type pollDir struct {
	pending []byte  // read from the source, not yet taken by the destination
	pbuf    *[]byte // the pooled buffer pending points into
	since   int64   // unix nanos since when pending waits
	total   int64   // bytes read from the source
	eof     bool    // the source ended
	counter prometheus.Counter
}

func newEpollEngine(idle, wto, batch time.Duration, bufs *sync.Pool) (*epollEngine, error) {
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
	ep := &epollEngine{
		epfd: epfd, wakefd: int(wfd), idle: idle, wto: wto, batch: batch, bufs: bufs, blocking: runtime.GOMAXPROCS(0) >= 2,
		fds: map[int32]*pollPair{}, pairs: map[*pollPair]struct{}{},
		links: map[int32]*linkConn{}, clients: map[int32]*linkStream{},
		scratch: make([]byte, BufferSize), done: make(chan struct{}),
	}
	go ep.run()
	return ep, nil
}

// errAdoptClosed says the splice was closed while it was being handed to the engine.
var errAdoptClosed = errors.New("connection closed during hand-off")

// adopt hands s's two connections to the engine: their descriptors are duplicated, the
// net.Conns closed (which takes them out of Go's poller), and from then on the engine
// owns them, counts their bytes and ends the splice (untrack, metrics). On an error s
// is unchanged, or its connections are already closed, and the caller copies with
// goroutines as before.
func (ep *epollEngine) adopt(s *splice) error {
	ts, sock := tlsOf(s.client)
	cfd, err := dupConn(sock)
	if err != nil {
		return err
	}
	bfd, err := dupConn(s.backend)
	if err != nil {
		syscall.Close(cfd)
		return err
	}
	pp := &pollPair{s: s, tls: ts, last: time.Now().UnixNano()}
	pp.side[0].fd, pp.side[1].fd = cfd, bfd
	pp.dir[0].counter = s.p.Metrics.bytes(dirUp)
	pp.dir[1].counter = s.p.Metrics.bytes(dirDown)
	s.mu.Lock()
	s.pp, s.ep = pp, ep
	s.mu.Unlock()
	took := false
	s.closeOnce.Do(func() {
		took = true
		if ts != nil {
			ts.release()
		} else {
			s.client.Close()
		}
		s.backend.Close()
	})
	if !took {
		s.mu.Lock()
		s.pp, s.ep = nil, nil
		s.mu.Unlock()
		syscall.Close(cfd)
		syscall.Close(bfd)
		return errAdoptClosed
	}
	if !ep.send(pollCmd{pair: pp, add: true}) {
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
func (ep *epollEngine) paused() int64 { return ep.pauses.Load() }

// close asks the engine to close pp; safe from any goroutine.
func (ep *epollEngine) close(pp *pollPair) { ep.send(pollCmd{pair: pp}) }

// send queues c for the engine and wakes it; false once the engine has stopped.
func (ep *epollEngine) send(c pollCmd) bool {
	ep.mu.Lock()
	if ep.stopped {
		ep.mu.Unlock()
		return false
	}
	ep.queue = append(ep.queue, c)
	ep.mu.Unlock()
	ep.wake()
	return true
}

func (ep *epollEngine) wake() {
	one := uint64(1)
	syscall.Write(ep.wakefd, (*[8]byte)(unsafe.Pointer(&one))[:])
}

// stop ends the engine once its pairs are gone (Proxy.Close has closed them) and waits.
func (ep *epollEngine) stop() {
	ep.mu.Lock()
	ep.stopped = true
	ep.mu.Unlock()
	ep.wake()
	<-ep.done
}

// tick is how often timeouts are checked: a quarter of the shortest one, within
// [10 ms, 1 s].
func (ep *epollEngine) tick() time.Duration {
	t := min(ep.idle, ep.wto, closeGrace) / 4
	return max(10*time.Millisecond, min(t, time.Second))
}

func (ep *epollEngine) run() {
	defer close(ep.done)
	defer syscall.Close(ep.wakefd)
	if ep.blocking {
		ep.runBlocking()
		return
	}
	// The epoll set is itself waited on through Go's poller: the engine goroutine parks
	// there while nothing is ready, so it needs no thread of its own, and a wake-up
	// for any number of ready sockets is one goroutine wake-up. All the work runs
	// inside the poller's callback, so that readiness that arrives meanwhile is kept
	// for the next wait rather than reset.
	f := os.NewFile(uintptr(ep.epfd), "edge-epoll")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		ep.closeAll()
		return
	}
	events := make([]syscall.EpollEvent, 256)
	tick := ep.tick()
	next := time.Now().Add(tick)
	stop := false
	turn := func(uintptr) bool {
		for !stop {
			n := epollPoll(ep.epfd, events)
			if n == 0 {
				return false
			}
			t := time.Now()
			now := t.UnixNano()
			if stop = ep.dispatch(events[:n], now); stop {
				return true
			}
			if !t.Before(next) {
				ep.timeouts(now)
				next = t.Add(tick)
			}
			if ep.pace() {
				continue // events may wait: poll again
			}
			if n < len(events) && !ep.more {
				return false // nothing known to wait: park until the set signals again
			}
		}
		return true
	}
	for !stop {
		_ = f.SetReadDeadline(next)
		if err := rc.Read(turn); err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				ep.closeAll()
				return
			}
			now := time.Now()
			ep.timeouts(now.UnixNano())
			next = now.Add(tick)
		}
	}
}

// runBlocking is run waiting in epoll_wait itself, at most until the next timeout
// scan; while a read filled its whole buffer it only polls.
func (ep *epollEngine) runBlocking() {
	defer syscall.Close(ep.epfd)
	events := make([]syscall.EpollEvent, 256)
	tick := ep.tick()
	next := time.Now().Add(tick)
	for {
		wait := 0
		if !ep.more {
			wait = max(1, int((time.Until(next)+time.Millisecond-1)/time.Millisecond))
		}
		n, err := syscall.EpollWait(ep.epfd, events, wait)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			ep.closeAll()
			return
		}
		t := time.Now()
		now := t.UnixNano()
		ep.more = false
		if n > 0 && ep.dispatch(events[:n], now) {
			return
		}
		if !t.Before(next) {
			ep.timeouts(now)
			next = t.Add(tick)
		}
		ep.pace()
	}
}

// pace keeps passes over the ready sockets at least ep.batch apart while the last pass
// handled two or more events of players on links: it sleeps out the rest of the
// batch time and says so. Under load a pass then handles every message that arrived
// meanwhile, with one wake-up of the engine and one write to each link (and so one
// read by each map) instead of one for every few messages; a game's inputs and
// snapshots, a tick (tens of ms) apart, wait at most the batch time more. A lone
// player's message is handled at once, as is all other traffic.
func (ep *epollEngine) pace() bool {
	if ep.batch <= 0 || ep.linkEvents < 2 {
		return false
	}
	rest := time.Duration(ep.passAt + int64(ep.batch) - time.Now().UnixNano())
	if rest <= 0 {
		return false
	}
	if ep.blocking {
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
// when the engine is to end.
func (ep *epollEngine) dispatch(events []syscall.EpollEvent, now int64) bool {
	ep.more = false
	ep.passAt, ep.linkEvents = now, 0
	for i := range events {
		ev := &events[i]
		if int(ev.Fd) == ep.wakefd {
			if ep.commands(now) {
				return true
			}
			continue
		}
		// Clients of links first: with links, they are nearly every event.
		if st := ep.clients[ev.Fd]; st != nil {
			ep.linkEvents++
			ep.pumpClient(st, ev.Events, now)
			continue
		}
		if lk := ep.links[ev.Fd]; lk != nil {
			ep.linkEvents++
			ep.pumpLink(lk, ev.Events, now)
			continue
		}
		pp := ep.fds[ev.Fd]
		if pp == nil || pp.closed {
			continue
		}
		side := 0
		if int(ev.Fd) == pp.side[1].fd {
			side = 1
		}
		ep.pump(pp, side, ev.Events, now)
	}
	ep.writeLinks(now)
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

// commands runs the queued adds and closes; true when the engine is to end.
func (ep *epollEngine) commands(now int64) bool {
	var buf [8]byte
	_, _ = syscall.Read(ep.wakefd, buf[:])
	ep.mu.Lock()
	q := ep.queue
	ep.queue = nil
	stopped := ep.stopped
	ep.mu.Unlock()
	for _, c := range q {
		switch {
		case c.op != 0:
			ep.linkCommand(c, now)
		case c.add && c.pair.closeReq:
			ep.register(c.pair, now)
			ep.finish(c.pair)
		case c.add:
			ep.register(c.pair, now)
			ep.pump(c.pair, 0, syscall.EPOLLIN, now)
			ep.pump(c.pair, 1, syscall.EPOLLIN, now)
		default:
			c.pair.closeReq = true
			if _, ok := ep.pairs[c.pair]; ok {
				ep.finish(c.pair)
			}
		}
	}
	if stopped {
		ep.closeAll()
		return true
	}
	return false
}
