package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/edge"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// openEdge runs the edge in this process in front of the orchestrator whose control
// listener is at controlURL, with the credential the orchestrator wrote to credFile
// (as compose runs it: never the root secret), and waits until it has the route table.
// Each set function changes the edge before it opens.
func openEdge(t *testing.T, controlURL, credFile string, set ...func(*edge.Edge)) *edge.Edge {
	t.Helper()
	return openEdgeLog(t, controlURL, credFile, slog.New(slog.DiscardHandler), set...)
}

// openEdgeLog is openEdge logging to log.
func openEdgeLog(t *testing.T, controlURL, credFile string, log *slog.Logger, set ...func(*edge.Edge)) *edge.Edge {
	t.Helper()
	e, err := edge.New(testEdgeConfig("127.0.0.1:0", controlURL, credFile), log)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range set {
		f(e)
	}
	if err := e.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	waitStatus(t, e.PublicURL()+"/readyz", http.StatusOK, 30*time.Second)
	return e
}

// testEdgeConfig is the configuration of a test's edge listening on addr in front of
// the orchestrator's control listener at controlURL.
func testEdgeConfig(addr, controlURL, credFile string) edge.Config {
	return edge.Config{PublicAddr: addr, MetricsAddr: "127.0.0.1:0", OrchURL: controlURL,
		CredentialFile: credFile, MaxConns: 100, Procs: 1, IdleTimeoutMS: 60000, WriteTimeoutMS: 5000, DrainTimeoutMS: 1000, LogLevel: "info"}
}

// pinger keeps one player's ping/pong going on its own goroutine and counts the pongs,
// so a test sees whether the connection carried traffic the whole time.
type pinger struct {
	c     *websocket.Conn
	pongs atomic.Int64
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	err   error
}

func startPinger(c *websocket.Conn) *pinger {
	p := &pinger{c: c, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for t := 1; ; t++ {
			select {
			case <-p.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if err := c.WriteMessage(websocket.TextMessage, []byte(fmt.Sprintf(`{"v":1,"kind":"ping","t":%d}`, t))); err != nil {
				p.fail(err)
				return
			}
			for {
				_, data, err := c.ReadMessage()
				if err != nil {
					p.fail(err)
					return
				}
				var m struct {
					Kind string
					T    int
				}
				if json.Unmarshal(data, &m) == nil && m.Kind == "pong" && m.T == t {
					break
				}
			}
			p.pongs.Add(1)
		}
	}()
	return p
}

func (p *pinger) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err = err
}

// check fails the test if the connection broke, and waits until it carries n more pongs.
func (p *pinger) check(t *testing.T, what string, n int64) {
	t.Helper()
	want := p.pongs.Load() + n
	deadline := time.Now().Add(10 * time.Second)
	for p.pongs.Load() < want {
		p.mu.Lock()
		err := p.err
		p.mu.Unlock()
		if err != nil {
			t.Fatalf("%s: the player's connection broke after %d pongs: %v", what, p.pongs.Load(), err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no pong for 10 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// joinAndPlay joins through the edge and connects the player's WebSocket, returning it
// after the welcome.
func joinAndPlay(t *testing.T, e *edge.Edge) *websocket.Conn {
	t.Helper()
	var j public.JoinResponse
	testutil.PostJSON(t, e.PublicURL()+public.PathJoin, "", `{"name":"stays"}`, http.StatusOK, &j)
	c := dialWS(t, "ws"+strings.TrimPrefix(e.PublicURL(), "http")+j.WS)
	sendWS(t, c, `{"v":1,"kind":"hello","ticket":"`+j.Ticket+`"}`)
	var w struct{ Kind string }
	readWS(t, c, &w)
	if w.Kind != "welcome" {
		t.Fatalf("welcome: %+v", w)
	}
	return c
}

// joinUnavailable checks that a join through the edge fails fast with unavailable.
func joinUnavailable(t *testing.T, e *edge.Edge) {
	t.Helper()
	start := time.Now()
	resp, err := http.Post(e.PublicURL()+public.PathJoin, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var er httpkit.ErrorResponse
	if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(body, &er) != nil || er.Error.Code != apierr.EUNAVAILABLE {
		t.Fatalf("join while the orchestrator is away: %d %s, want 503 unavailable", resp.StatusCode, body)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("join took %s to fail, want fast", d)
	}
}

// TestEdge_PlayersSurviveOrchestratorRestart runs the real orchestrator as a child
// process, the edge and real map containers. A player connected through the edge keeps
// exchanging ping/pong while the orchestrator is SIGKILLed and comes back, and again
// while it is stopped and a new one (an upgrade) starts; joins during each outage get
// unavailable at once and work again afterwards, and the player never reconnects.
func TestEdge_PlayersSurviveOrchestratorRestart(t *testing.T) {
	cli := dockertest.Client(t)
	deployment := "test-" + randomHex(t, 4)
	// Its own map network, removed after its containers: nothing shared with other
	// deployments on the engine.
	t.Cleanup(func() { _ = cli.NetworkRemove(context.Background(), deployment) })
	t.Cleanup(func() { dockertest.RemoveDeployment(t, cli, deployment) })
	secret := randomHex(t, 16)
	// The control port stays the same across restarts, as in a deployment: the edge and
	// the running maps keep calling it.
	env := childEnv(deployment, "127.0.0.1:"+strconv.Itoa(testutil.FreePort(t)), filepath.Join(t.TempDir(), "mapyard.db"), secret,
		"ORCH_MAP_NETWORK="+deployment,
		"ORCH_DEFAULT_INSTANCE_ID="+deployment+"-d",
		"ORCH_WARM_POOL_SIZE=0",
		"ORCH_MAP_PROBE_MS=300",
		"MAP_HEARTBEAT_MS=300",
	)
	orch := startOrchestrator(t, env)
	waitStatus(t, orch.public+"/readyz", http.StatusOK, 60*time.Second)
	e := openEdge(t, orch.control, orch.edgeCredential)

	player := startPinger(joinAndPlay(t, e))
	t.Cleanup(func() { close(player.stop); <-player.done })
	player.check(t, "before any restart", 5)
	// The edge carries the player over its link to the map container (the map image
	// serves one), not over a connection of the player's own.
	if body := scrape(t, e.MetricsURL()+"/metrics", ""); !strings.Contains(string(body), "\nmapyard_edge_map_links 1\n") {
		t.Fatalf("the edge has no link to the map open:\n%s", body)
	}
	parent := t

	for _, tc := range []struct {
		name string
		stop func(*childOrchestrator)
	}{
		{"SIGKILL", func(c *childOrchestrator) {
			if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			c.wait(10 * time.Second)
		}},
		{"Upgrade", func(c *childOrchestrator) {
			if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := c.wait(15 * time.Second); err != nil {
				t.Fatalf("orchestrator did not stop cleanly: %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.stop(orch)
			waitStatus(t, e.PublicURL()+"/readyz", http.StatusServiceUnavailable, 10*time.Second)
			player.check(t, "orchestrator away", 10)
			joinUnavailable(t, e)
			player.check(t, "orchestrator away", 10)

			// Started on the parent test: the orchestrator outlives this subtest.
			orch = startOrchestrator(parent, env)
			waitStatus(t, orch.public+"/readyz", http.StatusOK, 30*time.Second)
			waitStatus(t, e.PublicURL()+"/readyz", http.StatusOK, 10*time.Second)
			second := joinAndPlay(t, e)
			sendWS(t, second, `{"v":1,"kind":"ping","t":7}`)
			player.check(t, "orchestrator back", 10)
			second.Close()
		})
	}
}
