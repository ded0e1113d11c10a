package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/routetable"
	"github.com/mapyard/mapyard/orchestrator/edge/handover"
)

// Replacing the edge without refusing a connection (docs/edge.md, "Replacing the edge").
// An edge with a handover socket (EDGE_HANDOVER_SOCKET) first asks the edge answering
// there for its listeners; it gets the very sockets, serves them, and then the old edge
// stops accepting and closes its players' WebSockets a few at a time over
// HandoverSpread, so that they resume through the new edge at once, and exits. An edge
// that finds none binds its listeners, and either way answers on the socket for the
// edge that will replace it.

// Names of the listeners handed over.
const (
	listenerPublic  = "public"
	listenerMetrics = "metrics"
	listenerHTTP    = "http" // the plain listener that redirects to HTTPS (EDGE_HTTP_ADDR)
)

const (
	// handoverTimeout bounds asking the old edge for its listeners, and its
	// confirmation that it stopped accepting.
	handoverTimeout = 5 * time.Second
	// spreadStep is how often the closes of a spread are made, a share each time.
	spreadStep = 10 * time.Millisecond
)

// handoverState is the part of an Edge that hands its listeners over.
type handoverState struct {
	server     *handover.Server
	handedOver chan struct{} // closed once a successor took the listeners
	served     chan struct{} // closed when the handover server's Serve returned
	public     *gate
	metrics    *gate
	http       *gate // nil without EDGE_HTTP_ADDR
}

// handoverTable is the state an edge passes on with its listeners: its route table,
// so that its successor forwards players at once, even while the orchestrator is away.
type handoverTable struct {
	Table  routetable.RouteTable `json:"table"`
	Online bool                  `json:"online"`
}

// HandedOver is closed once another edge has taken this one's listeners: this edge no
// longer accepts, and its Close closes its players' WebSockets over HandoverSpread.
func (e *Edge) HandedOver() <-chan struct{} { return e.ho.handedOver }

// handedOverYet says whether another edge has taken this one's listeners.
func (e *Edge) handedOverYet() bool {
	select {
	case <-e.ho.handedOver:
		return true
	default:
		return false
	}
}

// listen takes the public and metrics listeners from the edge answering at the
// handover socket, or binds them. It returns the takeover to complete once this edge
// serves them (nil when it bound them itself).
func (e *Edge) listen() (*handover.Takeover, error) {
	e.ho.handedOver = make(chan struct{})
	var t *handover.Takeover
	if e.HandoverSocket != "" {
		ctx, cancel := context.WithTimeout(context.Background(), handoverTimeout)
		var err error
		t, err = handover.Take(ctx, e.HandoverSocket, Version)
		cancel()
		switch {
		case errors.Is(err, handover.ErrNoOwner):
			e.Log.Debug("no edge to take over from; binding the listeners", "socket", e.HandoverSocket)
		case err != nil:
			e.Log.Warn("the edge at the handover socket did not hand its listeners over; binding them", "socket", e.HandoverSocket, "err", err)
		}
	}
	public, err := e.inherit(t, listenerPublic, e.PublicAddr)
	if err != nil {
		closeTakeover(t)
		return nil, fmt.Errorf("listen public %s: %w", e.PublicAddr, err)
	}
	metrics, err := e.inherit(t, listenerMetrics, e.MetricsAddr)
	if err != nil {
		public.Close()
		closeTakeover(t)
		return nil, fmt.Errorf("listen metrics %s: %w", e.MetricsAddr, err)
	}
	if e.cfg.HTTPAddr != "" {
		plain, err := e.inherit(t, listenerHTTP, e.cfg.HTTPAddr)
		if err != nil {
			public.Close()
			metrics.Close()
			closeTakeover(t)
			return nil, fmt.Errorf("listen http %s: %w", e.cfg.HTTPAddr, err)
		}
		e.ho.http = &gate{Listener: plain}
		e.httpLn = e.ho.http
	} else if t != nil {
		if ln := t.Listener(listenerHTTP); ln != nil {
			ln.Close() // the old edge redirected to HTTPS; this one does not
		}
	}
	e.ho.public, e.ho.metrics = &gate{Listener: public}, &gate{Listener: metrics}
	e.publicLn, e.metricsLn = e.ho.public, e.ho.metrics
	if t != nil {
		e.inheritRoutes(t.State)
	}
	return t, nil
}

func closeTakeover(t *handover.Takeover) {
	if t != nil {
		t.Close()
	}
}

// inherit returns the listener t passed under name when it listens where addr says,
// else a new one bound to addr.
func (e *Edge) inherit(t *handover.Takeover, name, addr string) (net.Listener, error) {
	if t != nil {
		if ln := t.Listener(name); ln != nil {
			if listensOn(ln.Addr(), addr) {
				return ln, nil
			}
			e.Log.Warn("the old edge listened elsewhere; binding anew", "listener", name, "old", ln.Addr().String(), "want", addr)
			ln.Close()
		}
	}
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EACCES) {
		// The edge runs as a user of its own: ports 80 and 443 are the host's to open.
		return nil, fmt.Errorf("%w (a port below 1024 needs the host's net.ipv4.ip_unprivileged_port_start at or below it, "+
			"or the capability NET_BIND_SERVICE: docs/operations.md#https)", err)
	}
	return ln, err
}

// listensOn says whether a listener on a serves what a listen on addr would: the same
// port (any, for port 0) on the same address (any unspecified one, for an empty or
// unspecified host).
func listensOn(a net.Addr, addr string) bool {
	got, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	want, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return false
	}
	if want.Port != 0 && want.Port != got.Port {
		return false
	}
	if want.IP == nil || want.IP.IsUnspecified() {
		return got.IP.IsUnspecified()
	}
	return want.IP.Equal(got.IP)
}

// inheritRoutes starts from the route table the old edge passed on.
func (e *Edge) inheritRoutes(state json.RawMessage) {
	if len(state) == 0 || e.Routes.isStatic() {
		return
	}
	var s handoverTable
	if err := json.Unmarshal(state, &s); err != nil {
		e.Log.Warn("the old edge's route table does not parse; waiting for the orchestrator's", "err", err)
		return
	}
	// A zero fetch time: a player for an instance the table lacks still makes the edge
	// ask the orchestrator at once.
	e.Routes.set(s.Table, time.Time{})
	if !s.Online {
		e.Routes.setOffline()
	}
	e.Proxy.Metrics.table(s.Online, len(s.Table.Routes))
}

// completeHandover tells the old edge, if this one took its listeners, that this one
// serves them, and then answers at the handover socket for the edge that will replace
// this one.
func (e *Edge) completeHandover(t *handover.Takeover) {
	e.ho.served = make(chan struct{})
	if e.HandoverSocket == "" {
		close(e.ho.served)
		return
	}
	// Listening first: the socket at the path is this edge's before the old one
	// stops, so an edge that starts meanwhile finds one that answers.
	srv, err := handover.Listen(e.HandoverSocket)
	if err != nil {
		e.Log.Warn("no handover socket: the edge that replaces this one will have to wait for its port", "err", err)
	}
	if t != nil {
		ctx, cancel := context.WithTimeout(context.Background(), handoverTimeout)
		err := t.Ready(ctx)
		cancel()
		if err != nil {
			e.Log.Warn("the old edge did not confirm that it stopped accepting", "err", err)
		} else {
			e.Log.Info("took the listeners over from the old edge", "oldVersion", t.Version, "routes", e.Routes.Len())
		}
	}
	if srv == nil {
		close(e.ho.served)
		return
	}
	srv.Version, srv.Log = Version, e.Log
	e.ho.server = srv
	go func() {
		defer close(e.ho.served)
		if srv.Serve(e.offer, e.stopAccepting) == nil {
			close(e.ho.handedOver)
		}
	}()
}

// offer is what this edge hands over: its listeners' sockets and its route table.
func (e *Edge) offer() (handover.Offer, error) {
	if e.ho.public.shut.Load() {
		return handover.Offer{}, errors.New("this edge is shutting down")
	}
	o := handover.Offer{Listeners: []handover.Listener{
		{Name: listenerPublic, Listener: e.ho.public.Listener},
		{Name: listenerMetrics, Listener: e.ho.metrics.Listener},
	}}
	if e.ho.http != nil {
		o.Listeners = append(o.Listeners, handover.Listener{Name: listenerHTTP, Listener: e.ho.http.Listener})
	}
	if !e.Routes.isStatic() {
		online, _ := e.Routes.Status()
		o.State, _ = json.Marshal(handoverTable{Table: e.Routes.table(), Online: online})
	}
	return o, nil
}

// stopAccepting closes this edge's descriptors of its listeners, which its successor
// now serves; requests in flight go on (Close waits for them).
func (e *Edge) stopAccepting() {
	e.ho.public.Close()
	e.ho.metrics.Close()
	if e.ho.http != nil {
		e.ho.http.Close()
	}
}

// closeHandover stops answering at the handover socket and waits for a handover under
// way to end.
func (e *Edge) closeHandover() {
	if e.ho.server != nil {
		e.ho.server.Close()
	}
	if e.ho.served != nil {
		<-e.ho.served
	}
}

// gate is a listener whose Accept, once it was closed, answers http.ErrServerClosed:
// the HTTP server that serves it then ends as after a Shutdown, and its Shutdown, later,
// still waits for the requests in flight. An edge that handed over closes its listeners
// at once, and its servers when its players are gone.
type gate struct {
	net.Listener
	shut atomic.Bool
	once sync.Once
	err  error
}

func (g *gate) Accept() (net.Conn, error) {
	c, err := g.Listener.Accept()
	if err != nil && g.shut.Load() {
		return nil, http.ErrServerClosed
	}
	return c, err
}

func (g *gate) Close() error {
	g.once.Do(func() {
		g.shut.Store(true)
		g.err = g.Listener.Close()
	})
	return g.err
}

// closeSpread closes the proxy's connections evenly over window, each once, so that
// their clients come back a few at a time: at every step the connections still open
// earn the share of a close that the step is of what is left of the window, and the
// whole ones earned are closed. Connections that arrive meanwhile are closed too. It
// returns when none is left unclosed or ctx is done.
func (p *Proxy) closeSpread(ctx context.Context, window time.Duration) {
	deadline := time.Now().Add(window)
	closed := map[*splice]bool{}
	tick := time.NewTicker(spreadStep)
	defer tick.Stop()
	earned := 0.0
	for {
		p.mu.Lock()
		open := make([]*splice, 0, len(p.conns))
		for s := range p.conns {
			if !closed[s] {
				open = append(open, s)
			}
		}
		p.mu.Unlock()
		if len(open) == 0 {
			return
		}
		n := len(open)
		if left := time.Until(deadline); left > spreadStep {
			earned += float64(len(open)) * float64(spreadStep) / float64(left)
			n = min(int(earned), len(open))
			earned -= float64(n)
		}
		for _, s := range open[:n] {
			closed[s] = true
			s.closeBoth()
			p.Metrics.handoverClosed()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
