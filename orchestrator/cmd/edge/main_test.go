package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/orchestrator/edge"
)

// TestMain lets tests run the real edge as a child process: the test binary
// re-executed with MAPYARD_EDGE_CHILD=1 behaves exactly like the edge binary.
func TestMain(m *testing.M) {
	if os.Getenv("MAPYARD_EDGE_CHILD") == "1" {
		os.Exit(edge.Run(nil, os.Environ(), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestHandover_NoConnectionRefused replaces a running edge process with a new one
// through the handover socket while clients dial the public port without a pause:
// not one connection or upgrade fails, the old edge closes its player's WebSocket,
// and the player is back through the same URL at once, on the new edge.
func TestHandover_NoConnectionRefused(t *testing.T) {
	mapPort := echoMap(t)
	env := []string{
		"EDGE_PUBLIC_ADDR=127.0.0.1:0", "EDGE_METRICS_ADDR=127.0.0.1:0",
		"EDGE_HANDOVER_SOCKET=" + filepath.Join(t.TempDir(), "edge.sock"),
		"EDGE_STATIC_ROUTES=m1=" + fmt.Sprint(mapPort), "EDGE_CREDENTIAL=unused",
		"EDGE_WS_RATE_PER_MIN=0", "EDGE_HANDOVER_SPREAD_MS=200",
	}
	old := startEdge(t, "old", env)
	base := old.waitLog(t, "edge listening", 10*time.Second)["public"].(string)
	wsURL := "ws" + strings.TrimPrefix(base, "http") + "/maps/m1/ws"

	player := dialEcho(t, wsURL)
	defer player.Close()

	loop := startDialLoop(base, wsURL)
	defer loop.stop()
	loop.waitOK(t, 20)

	replacement := startEdge(t, "new", env)
	took := replacement.waitLog(t, "took the listeners over from the old edge", 10*time.Second)
	if took == nil {
		t.Fatal("the new edge did not take over")
	}
	if code := old.waitExit(t, 10*time.Second); code != 0 {
		t.Fatalf("the old edge exited with %d", code)
	}
	old.waitLog(t, "handed over to a new edge; closing the players' connections so that they resume there", time.Second)
	// The loop goes on against the new edge alone.
	loop.waitOK(t, loop.ok.Load()+20)
	loop.stop()
	if n := loop.failed.Load(); n != 0 {
		t.Fatalf("%d of %d connections failed during the handover; first: %v", n, n+loop.ok.Load(), loop.firstErr())
	}
	t.Logf("%d connections and upgrades, none refused; %d loop WebSockets closed by the handover", loop.ok.Load(), loop.closed.Load())

	// The player's WebSocket on the old edge was closed...
	_ = player.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := player.ReadMessage(); err == nil || isTimeout(err) {
		t.Fatalf("the player's WebSocket on the old edge is still open: %v", err)
	}
	// ...and the same URL serves it on the new edge.
	again := dialEcho(t, wsURL)
	again.Close()

	if err := replacement.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := replacement.waitExit(t, 15*time.Second); code != 0 {
		t.Fatalf("the new edge exited with %d on SIGTERM", code)
	}
}

// TestHandover_FreshStart: with nothing at the handover socket, or a socket file a
// crashed edge left, the edge binds its port itself.
func TestHandover_FreshStart(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "edge.sock")
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // the file stays, as after a crash
	e := startEdge(t, "edge", []string{
		"EDGE_PUBLIC_ADDR=127.0.0.1:0", "EDGE_METRICS_ADDR=127.0.0.1:0", "EDGE_HANDOVER_SOCKET=" + sock,
		"EDGE_STATIC_ROUTES=m1=1", "EDGE_CREDENTIAL=unused",
	})
	base := e.waitLog(t, "edge listening", 10*time.Second)["public"].(string)
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}
}

// echoMap serves a map's WebSocket path that echoes every message, and no link (the
// edge then gives each player a connection of its own); it returns its port.
func echoMap(t *testing.T) int {
	t.Helper()
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	mux := http.NewServeMux()
	mux.HandleFunc(mapcontract.GamePath, func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			mt, b, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(mt, b); err != nil {
				return
			}
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// dialEcho opens a WebSocket at url and checks that a message comes back.
func dialEcho(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	c, err := echo(url, true)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var wsDialer = &websocket.Dialer{HandshakeTimeout: 5 * time.Second}

// echo dials url, sends a message and reads it back; it keeps the connection open
// when keep is set.
func echo(url string, keep bool) (*websocket.Conn, error) {
	c, _, err := wsDialer.Dial(url, nil)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	_ = c.NetConn().SetDeadline(time.Now().Add(5 * time.Second))
	if err := c.WriteMessage(websocket.TextMessage, []byte("hello")); err != nil {
		c.Close()
		return nil, errEchoLost{err}
	}
	if _, b, err := c.ReadMessage(); err != nil || string(b) != "hello" {
		c.Close()
		return nil, errEchoLost{fmt.Errorf("read back %q: %w", b, err)}
	}
	_ = c.NetConn().SetDeadline(time.Time{})
	if !keep {
		c.Close()
		return nil, nil
	}
	return c, nil
}

// errEchoLost is a WebSocket that was upgraded and then closed before its message came
// back: the old edge closing its players, which is no refusal.
type errEchoLost struct{ error }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// dialLoop dials the public port without a pause: plain requests on new connections
// and WebSocket upgrades, and counts what failed.
type dialLoop struct {
	ok, failed, closed atomic.Int64
	mu                 sync.Mutex
	first              error
	done               chan struct{}
	wg                 sync.WaitGroup
	once               sync.Once
}

func startDialLoop(base, wsURL string) *dialLoop {
	l := &dialLoop{done: make(chan struct{})}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func() error {
		resp, err := hc.Get(base + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/healthz answered %d", resp.StatusCode)
		}
		return nil
	}
	upgrade := func() error {
		_, err := echo(wsURL, false)
		return err
	}
	for _, f := range []func() error{get, get, upgrade, upgrade} {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.done:
					return
				default:
				}
				err := f()
				var lost errEchoLost
				switch {
				case err == nil:
					l.ok.Add(1)
				case errors.As(err, &lost):
					l.closed.Add(1)
				default:
					l.failed.Add(1)
					l.mu.Lock()
					if l.first == nil {
						l.first = err
					}
					l.mu.Unlock()
				}
			}
		}()
	}
	return l
}

func (l *dialLoop) stop() {
	l.once.Do(func() { close(l.done) })
	l.wg.Wait()
}

func (l *dialLoop) firstErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first
}

// waitOK waits until n connections succeeded in all.
func (l *dialLoop) waitOK(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.ok.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the dial loop made %d connections in 10 s, want %d; failed %d, first: %v", l.ok.Load(), n, l.failed.Load(), l.firstErr())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// child is an edge process: the test binary in child mode.
type child struct {
	name string
	cmd  *exec.Cmd

	mu      sync.Mutex
	lines   []map[string]any
	changed chan struct{} // closed and replaced at each line, and at the exit
	exited  bool
	code    int
}

func startEdge(t *testing.T, name string, env []string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), "MAPYARD_EDGE_CHILD=1"), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{name: name, cmd: cmd, changed: make(chan struct{})}
	logs := make(chan struct{})
	go func() {
		defer close(logs)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Logf("%s: %s", name, sc.Text())
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			c.mu.Lock()
			c.lines = append(c.lines, line)
			close(c.changed)
			c.changed = make(chan struct{})
			c.mu.Unlock()
		}
	}()
	go func() {
		<-logs
		err := cmd.Wait()
		c.mu.Lock()
		c.exited, c.code = true, cmd.ProcessState.ExitCode()
		if err != nil && c.code == 0 {
			c.code = -1
		}
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		c.waitExit(t, 10*time.Second)
	})
	return c
}

// waitLog returns the first log line whose msg is msg, waiting for it up to timeout.
func (c *child) waitLog(t *testing.T, msg string, timeout time.Duration) map[string]any {
	t.Helper()
	deadline := time.After(timeout)
	for {
		c.mu.Lock()
		for _, l := range c.lines {
			if l["msg"] == msg {
				c.mu.Unlock()
				return l
			}
		}
		exited, changed := c.exited, c.changed
		c.mu.Unlock()
		if exited {
			t.Fatalf("%s exited without logging %q", c.name, msg)
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s did not log %q within %s", c.name, msg, timeout)
		}
	}
}

// waitExit waits for the process to exit and returns its exit code.
func (c *child) waitExit(t *testing.T, timeout time.Duration) int {
	t.Helper()
	deadline := time.After(timeout)
	for {
		c.mu.Lock()
		exited, code, changed := c.exited, c.code, c.changed
		c.mu.Unlock()
		if exited {
			return code
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s did not exit within %s", c.name, timeout)
		}
	}
}
