package handover_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mapyard/mapyard/orchestrator/edge/handover"
)

// owner is a process that serves a TCP listener and offers it at a handover socket.
type owner struct {
	srv     *handover.Server
	ln      net.Listener
	stopped atomic.Bool // stop was called
	served  chan error  // Serve's result
}

// startOwner listens on 127.0.0.1:0 and serves a handover socket at path that offers
// that listener as "public" with state.
func startOwner(t *testing.T, path string, state string) *owner {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	srv, err := handover.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	srv.Version = "old"
	o := &owner{srv: srv, ln: ln, served: make(chan error, 1)}
	go func() {
		o.served <- srv.Serve(func() (handover.Offer, error) {
			return handover.Offer{
				Listeners: []handover.Listener{{Name: "public", Listener: ln}},
				State:     json.RawMessage(state),
			}, nil
		}, func() {
			o.stopped.Store(true)
			ln.Close()
		})
	}()
	return o
}

func socketPath(t *testing.T) string { return filepath.Join(t.TempDir(), "edge.sock") }

func take(t *testing.T, path string) *handover.Takeover {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tk, err := handover.Take(ctx, path, "new")
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	return tk
}

func ready(t *testing.T, tk *handover.Takeover) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tk.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
}

// echoOnce accepts one connection on ln, reads one byte and writes it back.
func echoOnce(ln net.Listener) <-chan error {
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		b := make([]byte, 1)
		if _, err := io.ReadFull(c, b); err != nil {
			done <- err
			return
		}
		_, err = c.Write(b)
		done <- err
	}()
	return done
}

// roundTrip dials addr, writes one byte and reads it back.
func roundTrip(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte{42}); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil || b[0] != 42 {
		t.Fatalf("read back %v, %v", b, err)
	}
}

func TestHandover_PassesListenerAndState(t *testing.T) {
	path := socketPath(t)
	o := startOwner(t, path, `{"routes":["a","b"]}`)
	tk := take(t, path)
	if got, want := tk.Version, "old"; got != want {
		t.Errorf("owner version %q, want %q", got, want)
	}
	if got, want := string(tk.State), `{"routes":["a","b"]}`; got != want {
		t.Errorf("state %s, want %s", got, want)
	}
	if tk.Listener("metrics") != nil {
		t.Error("a listener the owner did not offer")
	}
	ln := tk.Listener("public")
	if ln == nil {
		t.Fatal("no public listener")
	}
	defer ln.Close()
	if got, want := ln.Addr().String(), o.ln.Addr().String(); got != want {
		t.Fatalf("listener on %s, want the owner's %s", got, want)
	}
	// The successor serves the socket before it says so.
	served := echoOnce(ln)
	roundTrip(t, ln.Addr().String())
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if o.stopped.Load() {
		t.Fatal("the owner stopped before the successor was ready")
	}
	ready(t, tk)
	if !o.stopped.Load() {
		t.Fatal("Ready returned before the owner stopped accepting")
	}
	if err := <-o.served; err != nil {
		t.Fatalf("Serve after a handover: %v", err)
	}
}

// TestHandover_OwnerStopsAccepting: once Ready returned, every connection goes to the
// successor, and the owner's accept loop has ended.
func TestHandover_OwnerStopsAccepting(t *testing.T) {
	path := socketPath(t)
	o := startOwner(t, path, "")
	var oldAccepted atomic.Int64
	oldLoop := make(chan struct{})
	go func() {
		defer close(oldLoop)
		for {
			c, err := o.ln.Accept()
			if err != nil {
				return
			}
			oldAccepted.Add(1)
			c.Close()
		}
	}()
	tk := take(t, path)
	ln := tk.Listener("public")
	defer ln.Close()
	ready(t, tk)
	select {
	case <-oldLoop:
	case <-time.After(5 * time.Second):
		t.Fatal("the owner still accepts after Ready")
	}
	before := oldAccepted.Load()
	const n = 50
	accepted := make(chan int, 1)
	go func() {
		k := 0
		for k < n {
			c, err := ln.Accept()
			if err != nil {
				break
			}
			k++
			c.Close()
		}
		accepted <- k
	}()
	for range n {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 2*time.Second)
		if err != nil {
			t.Fatalf("dial after the handover: %v", err)
		}
		c.Close()
	}
	if got := <-accepted; got != n {
		t.Fatalf("the successor accepted %d of %d", got, n)
	}
	if got := oldAccepted.Load(); got != before {
		t.Fatalf("the owner accepted %d connections after Ready", got-before)
	}
}

// TestHandover_QueuedConnectionsSurvive: connections that wait in the accept queue,
// accepted by nobody yet, are accepted by the successor after the owner closed its
// listener: it is one socket.
func TestHandover_QueuedConnectionsSurvive(t *testing.T) {
	path := socketPath(t)
	o := startOwner(t, path, "")
	const n = 20
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.DialTimeout("tcp", o.ln.Addr().String(), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	tk := take(t, path)
	ln := tk.Listener("public")
	defer ln.Close()
	ready(t, tk) // the owner has closed its descriptor of the socket
	got := map[byte]bool{}
	for range n {
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 1)
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatalf("read a queued connection: %v", err)
		}
		got[b[0]] = true
		c.Close()
	}
	if len(got) != n {
		t.Fatalf("accepted %d distinct queued connections, want %d", len(got), n)
	}
}

// TestHandover_SuccessorGoesAway: a successor that closes before Ready changes
// nothing; the next one takes over.
func TestHandover_SuccessorGoesAway(t *testing.T) {
	path := socketPath(t)
	o := startOwner(t, path, "")
	first := take(t, path)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	// The owner still serves its listener...
	served := echoOnce(o.ln)
	roundTrip(t, o.ln.Addr().String())
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if o.stopped.Load() {
		t.Fatal("the owner stopped for a successor that went away")
	}
	// ...and answers the next successor.
	second := take(t, path)
	ln := second.Listener("public")
	defer ln.Close()
	ready(t, second)
	if err := <-o.served; err != nil {
		t.Fatal(err)
	}
	served = echoOnce(ln)
	roundTrip(t, ln.Addr().String())
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

func TestTake_NoOwner(t *testing.T) {
	t.Run("NoSocket", func(t *testing.T) {
		_, err := handover.Take(context.Background(), socketPath(t), "new")
		if !errors.Is(err, handover.ErrNoOwner) {
			t.Fatalf("err = %v, want ErrNoOwner", err)
		}
	})
	t.Run("StaleSocket", func(t *testing.T) {
		path := socketPath(t)
		srv, err := handover.Listen(path)
		if err != nil {
			t.Fatal(err)
		}
		srv.Close() // the file stays, as after a crash
		if _, err := handover.Take(context.Background(), path, "new"); !errors.Is(err, handover.ErrNoOwner) {
			t.Fatalf("err = %v, want ErrNoOwner", err)
		}
		// A new owner binds over the stale file.
		srv, err = handover.Listen(path)
		if err != nil {
			t.Fatalf("Listen over a stale socket: %v", err)
		}
		srv.Close()
	})
}

// TestListen_ReplacesOwner: a successor that listens at the path of its owner gets the
// next successors, while the owner's socket still exists.
func TestListen_ReplacesOwner(t *testing.T) {
	path := socketPath(t)
	startOwner(t, path, `"first"`)
	startOwner(t, path, `"second"`)
	tk := take(t, path)
	defer tk.Close()
	if got := string(tk.State); got != `"second"` {
		t.Fatalf("state %s: the successor reached the first owner", got)
	}
}

func TestServe_Closed(t *testing.T) {
	srv, err := handover.Listen(socketPath(t))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- srv.Serve(func() (handover.Offer, error) { return handover.Offer{}, nil }, func() {})
	}()
	srv.Close()
	if err := <-done; !errors.Is(err, handover.ErrClosed) {
		t.Fatalf("Serve = %v, want ErrClosed", err)
	}
}

// TestServe_RefusesOtherProtocol: a message of another protocol version is refused with
// a reason, and the owner keeps its listener.
func TestServe_RefusesOtherProtocol(t *testing.T) {
	path := socketPath(t)
	o := startOwner(t, path, "")
	c, err := net.Dial("unixpacket", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(`{"v":99,"op":"take"}`)); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4096)
	n, err := c.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Op, Reason string }
	if err := json.Unmarshal(b[:n], &m); err != nil || m.Op != "refuse" || m.Reason == "" {
		t.Fatalf("answer %s, %v: want a refusal with a reason", b[:n], err)
	}
	if o.stopped.Load() {
		t.Fatal("the owner stopped")
	}
}
