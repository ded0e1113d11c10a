package edge

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/edgelink"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
)

// A link is one connection from the edge to a map that carries every player the edge
// forwards there, each as a stream (mapserver/kernel/edgelink has the format). Through it the map
// reads the inputs of many players with one system call and writes a snapshot round
// with another, and the edge writes what many clients sent in one write: with a
// connection per player, both sides of the hop paid a read and a wake-up per input and
// a write per snapshot. The edge still never parses a player's frames: a stream carries
// the bytes the player's own connection to the map would (only the headers of the
// map's frames are followed, as on a connection of the player's own: frameCursor).
//
// Links need the epoll engine, which owns them with the client sockets. A map that
// does not serve links (an image of an earlier release answers 404) is reached with a
// connection per player, and asked again after linkRetry.

// Link tunables.
const (
	// linkRetry is how long a map that refused a link is reached without one.
	linkRetry = time.Minute
	// linkReadSize is the link's read buffer: many clients' snapshots per read.
	linkReadSize = 64 << 10
	// maxLinkOut bounds what waits to be written to a map on its link; a map that
	// reads slower than that is cut, with every stream on the link.
	maxLinkOut = 8 << 20
	// maxStreamPending bounds what waits for one client that does not read: about
	// two seconds of a crowded view's snapshots (the map's own queue is 32 frames). A
	// client over it is dropped, as the map drops a client whose queue is full.
	maxStreamPending = 256 << 10
)

// linkEntry is the proxy's link to one map address: being dialled (ready open), up,
// or refused at a time.
type linkEntry struct {
	ready   chan struct{} // closed once conn or err is set
	conn    *linkConn
	err     error
	refused time.Time // the map answered the link's upgrade with something else than 101
}

// linkConn is one link, owned by the engine once added: every field below the mutex is
// the engine goroutine's.
type linkConn struct {
	p        *Proxy
	addr     string
	fd       int
	up, down prometheus.Counter // the proxy's byte counters
	dead     bool               // the engine ended the link; Forward dials a new one

	events   uint32
	rbuf     []byte // what was read and not yet parsed: at most one partial record
	out      []byte // records waiting to be written to the map
	outSince int64  // unix nanos since when out waits on a full socket
	queued   bool   // in the engine's list of links to write
	next     uint32 // the last stream id handed out
	streams  map[uint32]*linkStream
}

// linkStream is one player's stream on a link. The Forward goroutine makes it and
// waits on hs; the engine owns every other field.
type linkStream struct {
	lk  *linkConn
	req []byte      // the client's upgrade request, sent in the Open record
	hs  chan []byte // the map's answer to the upgrade; closed without one if the stream ended first
	s   *splice     // set with the client, once the map switched protocols
	id  uint32      // 0 until the engine opened it
	fd  int         // the client's descriptor once adopted, else -1
	evs uint32      // what the epoll set watches on fd
	tls *tlsSide    // the client's TLS session, once adopted, when it speaks TLS

	answered  bool
	pending   []byte      // map bytes the client has not taken yet
	since     int64       // unix nanos since when pending waits
	last      int64       // unix nanos of the last byte either way
	mapClosed bool        // the map ended the stream: the client is closed once pending is written
	frames    frameCursor // the map's frames to the client, from the bytes after its 101
	draining  bool        // the client's side is shut for writing; its input is read and dropped until grace
	grace     int64
	up, down  int64
	closed    bool

	// For a move to the next container of the instance (move_linux.go).
	instance string      // the map instance the client plays on
	openReq  []byte      // the client's upgrade request, opened again on the next container
	up2map   frameCursor // the client's frames to the map, to cut a move between two
	move     *streamMove // the move under way, if any
}

// streamMove is a stream's move under way. The engine owns it.
type streamMove struct {
	hello   []byte // the client's first message to the next container, as a masked frame
	skip    bool   // the client is still sending a frame it began towards the old container
	held    []byte // the client's whole frames waiting for the next container
	started int64  // unix nanos
}

// linkTable is the proxy's links by map address.
type linkTable struct {
	mu sync.Mutex
	m  map[string]*linkEntry
}

// forwardLink forwards the upgrade r over a link to the map at addr. handled is false
// when no link serves that map (no epoll engine, links off, a map that refused links):
// the caller then forwards with a connection of the player's own.
func (p *Proxy) forwardLink(w http.ResponseWriter, r *http.Request, instanceID, addr string) (handled bool, err error) {
	ep := p.engine()
	if !p.Link || ep == nil {
		return false, nil
	}
	lk, err := p.linkTo(ep, addr, instanceID)
	if lk == nil && err == nil {
		return false, nil
	}
	// From here on the connection slot Forward took is this function's to release,
	// or the splice's once tracked.
	if err != nil {
		p.release()
		return true, err
	}
	var req bytes.Buffer
	if err := p.upgradeRequest(r).Write(&req); err != nil {
		p.release()
		return true, apierr.Errorf(apierr.EBADREQUEST, "the upgrade request cannot be forwarded: %v", err)
	}
	st := &linkStream{lk: lk, req: req.Bytes(), hs: make(chan []byte, 1), fd: -1, instance: instanceID}
	st.openReq = st.req
	if !ep.openStream(st) {
		p.release()
		return true, apierr.Errorf(apierr.EUNAVAILABLE, "the edge is shutting down; try again shortly")
	}
	head, err := p.streamAnswer(st, instanceID)
	if err != nil {
		ep.closeStream(st)
		p.release()
		return true, err
	}
	client, crw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		ep.closeStream(st)
		p.release()
		return true, fmt.Errorf("hijack client connection: %w", err)
	}
	_ = client.SetDeadline(time.Now().Add(p.WriteTimeout))
	var early []byte
	if n := crw.Reader.Buffered(); n > 0 {
		b, _ := crw.Reader.Peek(n)
		early = bytes.Clone(b)
	}
	s := &splice{p: p, client: client, started: time.Now()}
	if _, err := client.Write(head); err != nil || !p.track(s) {
		client.Close()
		ep.closeStream(st)
		p.release()
		p.Log.Debug("websocket upgrade lost", "instance", instanceID, "err", err)
		return true, nil
	}
	_ = client.SetDeadline(time.Time{})
	p.Metrics.opened()
	if err := ep.adoptStream(st, s, early); err != nil {
		// The client is closed; the splice was ended by adoptStream.
		p.Log.Debug("websocket hand-off to the engine failed", "instance", instanceID, "err", err)
	}
	return true, nil
}

// streamAnswer waits for the map's answer to st's upgrade and returns the 101 head to
// replay to the client, or the refusal the client gets.
func (p *Proxy) streamAnswer(st *linkStream, instanceID string) ([]byte, error) {
	unavailable := func(why string) error {
		p.Metrics.refused("map_unreachable")
		p.Log.Warn("map websocket handshake over the link failed", "instance", instanceID, "err", why)
		return apierr.Errorf(apierr.EMAPUNAVAILABLE, "map instance %q did not answer", instanceID)
	}
	var head []byte
	select {
	case h, ok := <-st.hs:
		if !ok {
			return nil, unavailable("the link or the stream ended")
		}
		head = h
	case <-time.After(handshakeTimeout):
		return nil, unavailable("no answer within " + handshakeTimeout.String())
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(head)), nil)
	if err != nil {
		return nil, unavailable(err.Error())
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		p.Metrics.refused("map_refused")
		return nil, mapRefusal(instanceID, resp)
	}
	return head, nil
}

// linkTo returns the link to addr, dialling it if there is none; nil when the map
// refused links lately.
func (p *Proxy) linkTo(ep *epollEngine, addr, instanceID string) (*linkConn, error) {
	t := &p.links
	t.mu.Lock()
	if t.m == nil {
		t.m = map[string]*linkEntry{}
	}
	e := t.m[addr]
	switch {
	case e == nil:
	case !e.refused.IsZero() && time.Since(e.refused) < linkRetry:
		t.mu.Unlock()
		return nil, nil
	case e.conn != nil:
		// Up, or ended a moment ago (the engine then answers the stream's open with
		// nothing, and drops the entry).
		t.mu.Unlock()
		return e.conn, nil
	case e.conn == nil && e.err == nil && e.refused.IsZero():
		t.mu.Unlock() // being dialled by another request
		<-e.ready
		if e.err != nil {
			return nil, e.err
		}
		return e.conn, nil
	}
	e = &linkEntry{ready: make(chan struct{})}
	t.m[addr] = e
	t.mu.Unlock()

	lk, refused, err := p.dialLink(addr, instanceID)
	t.mu.Lock()
	switch {
	case refused:
		e.refused = time.Now()
	case err != nil:
		e.err = err
		delete(t.m, addr) // the next request dials again
	default:
		e.conn = lk
	}
	t.mu.Unlock()
	close(e.ready)
	if err != nil || refused {
		return nil, err
	}
	if !ep.addLink(lk) {
		return nil, apierr.Errorf(apierr.EUNAVAILABLE, "the edge is shutting down; try again shortly")
	}
	return lk, nil
}

// dropLink forgets lk once the engine ended it, so that the next request dials anew.
func (p *Proxy) dropLink(lk *linkConn) {
	t := &p.links
	t.mu.Lock()
	if e := t.m[lk.addr]; e != nil && e.conn == lk {
		delete(t.m, lk.addr)
	}
	t.mu.Unlock()
}

// dialLink dials addr and upgrades the connection to a link. refused says the map
// answered, but not with 101: it does not serve links.
func (p *Proxy) dialLink(addr, instanceID string) (lk *linkConn, refused bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.DialTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		p.Metrics.refused("map_unreachable")
		p.Log.Warn("map game port does not answer", "instance", instanceID, "addr", addr, "err", err)
		return nil, false, dialError{apierr.Errorf(apierr.EMAPUNAVAILABLE, "map instance %q did not answer", instanceID)}
	}
	defer c.Close() // the engine works on a duplicate of the descriptor
	_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
	req := "GET " + edgelink.Path + " HTTP/1.1\r\nHost: " + addr + "\r\nConnection: Upgrade\r\nUpgrade: " + edgelink.Protocol +
		"\r\n" + edgelink.FeatureHeader + ": " + edgelink.FeatureMove + "\r\n\r\n"
	if _, err := c.Write([]byte(req)); err != nil {
		return nil, false, p.linkFailed(instanceID, addr, err)
	}
	br := bufio.NewReaderSize(c, 1024)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, false, p.linkFailed(instanceID, addr, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols || !httpkit.HeaderHasToken(resp.Header, "Upgrade", edgelink.Protocol) {
		p.Log.Info("map does not serve links; forwarding with a connection per player", "addr", addr, "status", resp.StatusCode)
		return nil, true, nil
	}
	if br.Buffered() > 0 {
		return nil, false, p.linkFailed(instanceID, addr, errors.New("the map sent bytes before any stream was opened"))
	}
	fd, err := dupConn(c)
	if err != nil {
		return nil, false, p.linkFailed(instanceID, addr, err)
	}
	p.Log.Info("link to map opened", "addr", addr)
	return &linkConn{
		p: p, addr: addr, fd: fd, up: p.Metrics.bytes(dirUp), down: p.Metrics.bytes(dirDown),
		rbuf: make([]byte, 0, linkReadSize), streams: map[uint32]*linkStream{},
	}, false, nil
}

func (p *Proxy) linkFailed(instanceID, addr string, err error) error {
	p.Metrics.refused("map_unreachable")
	p.Log.Warn("link to map failed", "instance", instanceID, "addr", addr, "err", err)
	return apierr.Errorf(apierr.EMAPUNAVAILABLE, "map instance %q did not answer", instanceID)
}
