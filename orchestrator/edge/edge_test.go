package edge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/routetable"
	"github.com/mapyard/mapyard/orchestrator/edge"
)

const secret = "edge-test-secret-0123456789"

// fakeOrch is the orchestrator's side of what the edge calls on the control listener:
// the route watch and the join, both behind the secret. Down makes it refuse to answer
// as a dead process would (the connection is closed without an answer).
type fakeOrch struct {
	*httptest.Server
	mu      sync.Mutex
	table   routetable.RouteTable
	down    bool
	changed chan struct{}
	joins   []*http.Request
}

func newFakeOrch(tb testing.TB, routes ...routetable.Route) *fakeOrch {
	f := &fakeOrch{table: routetable.RouteTable{Version: "v1", Ready: true, Routes: routes}, changed: make(chan struct{})}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	tb.Cleanup(f.Close)
	return f
}

func (f *fakeOrch) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	down, table, changed := f.down, f.table, f.changed
	f.mu.Unlock()
	if down {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	if r.Header.Get(httpkit.SecretHeader) != secret {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"code":"edge_unauthorized","message":"missing or wrong X-Mapyard-Secret header"}}`)
		return
	}
	switch r.URL.Path {
	case routetable.PathRoutes:
		if r.URL.Query().Get("after") == table.Version {
			select {
			case <-changed:
			case <-r.Context().Done():
			case <-time.After(200 * time.Millisecond):
			}
			f.mu.Lock()
			table = f.table
			f.mu.Unlock()
		}
		_ = json.NewEncoder(w).Encode(table)
	case public.PathJoin:
		f.mu.Lock()
		f.joins = append(f.joins, r)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ticket":"t","instanceId":"forest-1","ws":"/maps/forest-1/ws"}`)
	default:
		if !strings.HasPrefix(r.URL.Path, public.PathCharacters) {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		f.mu.Lock()
		f.joins = append(f.joins, r)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Header.Get("Authorization") == "":
			w.Header().Set("WWW-Authenticate", `Bearer realm="mapyard"`)
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"code":"unauthorized","message":"this call needs the header Authorization: Bearer followed by the authKey"}}`)
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		default:
			_, _ = fmt.Fprintf(w, `{"method":%q,"path":%q}`, r.Method, r.URL.Path)
		}
	}
}

func (f *fakeOrch) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeOrch) setRoutes(version string, routes ...routetable.Route) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.table = routetable.RouteTable{Version: version, Ready: true, Routes: routes}
	close(f.changed)
	f.changed = make(chan struct{})
}

// MustOpenEdge starts an edge on loopback ports against the orchestrator at orchURL and
// waits until it has the orchestrator's table (when orchURL is not empty).
func MustOpenEdge(tb testing.TB, orchURL string, tune func(*edge.Config)) *edge.Edge {
	tb.Helper()
	return MustOpenEdgeLog(tb, orchURL, slog.New(slog.DiscardHandler), tune)
}

// MustOpenEdgeLog is MustOpenEdge logging to log.
func MustOpenEdgeLog(tb testing.TB, orchURL string, log *slog.Logger, tune func(*edge.Config)) *edge.Edge {
	tb.Helper()
	cfg := edge.Config{PublicAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", OrchURL: orchURL, Credential: secret,
		MaxConns: 100, Procs: 1, IdleTimeoutMS: 60000, WriteTimeoutMS: 5000, DrainTimeoutMS: 5000, LogLevel: "info"}
	if orchURL == "" {
		cfg.OrchURL = "http://127.0.0.1:1"
	}
	if tune != nil {
		tune(&cfg)
	}
	e, err := edge.New(cfg, log)
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close(context.Background()) })
	if orchURL != "" {
		waitFor(tb, "the edge's first route table", func() bool { online, _ := e.Routes.Status(); return online })
	}
	return e
}

func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// portOf returns the port of an httptest server.
func portOf(tb testing.TB, ts *httptest.Server) int {
	tb.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		tb.Fatal(err)
	}
	port, _ := strconv.Atoi(p)
	return port
}

// echoBackend is a tiny map game listener: it first reports the request it got as the
// map sees it, then echoes every message.
func echoBackend(tb testing.TB) *httptest.Server { return namedBackend(tb, "") }

// namedBackend is echoBackend naming itself in its report.
func namedBackend(tb testing.TB, name string) *httptest.Server {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.WriteJSON(map[string]string{"name": name, "path": r.URL.Path, "host": r.Host, "origin": r.Header.Get("Origin"),
			"query": r.URL.RawQuery, "xff": r.Header.Get("X-Forwarded-For")})
		for {
			typ, data, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(typ, data); err != nil {
				return
			}
		}
	}))
	tb.Cleanup(ts.Close)
	return ts
}

func ready(id string, port int) routetable.Route {
	return routetable.Route{InstanceID: id, State: "ready", GamePort: port}
}

func wsURL(e *edge.Edge, id string) string {
	return "ws" + strings.TrimPrefix(e.PublicURL(), "http") + public.WSPath(id)
}

// dialEcho connects through the edge and reads the backend's report.
func dialEcho(tb testing.TB, url string, h http.Header) (*websocket.Conn, map[string]string) {
	tb.Helper()
	c, _, err := websocket.DefaultDialer.Dial(url, h)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var seen map[string]string
	if err := c.ReadJSON(&seen); err != nil {
		tb.Fatal(err)
	}
	return c, seen
}

func echoOnce(tb testing.TB, c *websocket.Conn, msg string) {
	tb.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		tb.Fatal(err)
	}
	if _, got, err := c.ReadMessage(); err != nil || string(got) != msg {
		tb.Fatalf("echo %.40q, %v; want %.40q", got, err, msg)
	}
}

// errorOf checks an HTTP answer is the JSON error envelope with status and code.
func errorOf(tb testing.TB, resp *http.Response, status int, code string) string {
	tb.Helper()
	if resp == nil {
		tb.Fatalf("no HTTP answer, want %d %s", status, code)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e httpkit.ErrorResponse
	if resp.StatusCode != status || json.Unmarshal(body, &e) != nil || e.Error.Code != code || e.Error.Message == "" {
		tb.Fatalf("status %d body %s, want %d with code %s", resp.StatusCode, body, status, code)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		tb.Fatalf("content type %q, want JSON", ct)
	}
	return string(body)
}

func TestEdge_ProxiesToMapGamePort(t *testing.T) {
	backend := echoBackend(t)
	e := MustOpenEdge(t, newFakeOrch(t, ready("forest-1", portOf(t, backend))).URL, nil)
	public := strings.TrimPrefix(e.PublicURL(), "http://")
	origin := "http://" + public
	c, seen := dialEcho(t, wsURL(e, "forest-1")+"?mode=broadcast", http.Header{"Origin": {origin}, "X-Forwarded-For": {"6.6.6.6"}})
	if seen["path"] != "/ws" || seen["host"] != public || seen["origin"] != origin || seen["query"] != "mode=broadcast" || seen["xff"] != "127.0.0.1" {
		t.Fatalf("map saw %v", seen)
	}
	for _, msg := range []string{`{"v":1,"kind":"ping","t":1}`, strings.Repeat("y", 3*edge.BufferSize)} {
		echoOnce(t, c, msg)
	}
}

// TestEdge_DialsTheMapNetworkAddress checks that a map whose route carries its address
// on the map network is reached there, not through its loopback port.
func TestEdge_DialsTheMapNetworkAddress(t *testing.T) {
	network, loopback := namedBackend(t, "network"), namedBackend(t, "loopback")
	rt := ready("forest-1", portOf(t, loopback))
	rt.GameAddr = strings.TrimPrefix(network.URL, "http://")
	e := MustOpenEdge(t, newFakeOrch(t, rt).URL, nil)
	for range 2 {
		c, seen := dialEcho(t, wsURL(e, "forest-1"), nil)
		if seen["name"] != "network" {
			t.Fatalf("the edge reached the %q listener, want the map network's", seen["name"])
		}
		echoOnce(t, c, "hello")
	}
}

// TestEdge_FallsBackToLoopback checks that where the map network's addresses cannot be
// dialled, players still get in, through the loopback port, and the edge stops trying.
func TestEdge_FallsBackToLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusing := ln.Addr().String()
	ln.Close() // nothing listens there now: a dial is refused
	loopback := namedBackend(t, "loopback")
	rt := ready("forest-1", portOf(t, loopback))
	rt.GameAddr = refusing
	e := MustOpenEdge(t, newFakeOrch(t, rt).URL, nil)
	for i := range 2 {
		c, seen := dialEcho(t, wsURL(e, "forest-1"), nil)
		if seen["name"] != "loopback" {
			t.Fatalf("connection %d reached %q, want the loopback port", i, seen["name"])
		}
		echoOnce(t, c, "hello")
	}
	want := `
# HELP mapyard_edge_ws_refused_total Player WebSocket upgrades refused before the upgrade, by reason.
# TYPE mapyard_edge_ws_refused_total counter
mapyard_edge_ws_refused_total{reason="map_unreachable"} 1
`
	if err := testutil.GatherAndCompare(e.Registry, strings.NewReader(want), "mapyard_edge_ws_refused_total"); err != nil {
		t.Fatalf("one refused dial wanted, the second connection must not try the map network again: %v", err)
	}
}

// TestEdge_OverlayOnly checks EDGE_MAP_DIAL=overlay (Swarm, where a map publishes no
// port): a map is reached at its network address, an address that cannot be dialled
// is the player's refusal, never a detour through a loopback port, and a route without
// an address is refused as not ready.
func TestEdge_OverlayOnly(t *testing.T) {
	network, loopback := namedBackend(t, "network"), namedBackend(t, "loopback")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusing := ln.Addr().String()
	ln.Close()
	up := ready("up-1", portOf(t, loopback))
	up.GameAddr = strings.TrimPrefix(network.URL, "http://")
	gone := ready("gone-1", portOf(t, loopback))
	gone.GameAddr = refusing
	bare := ready("bare-1", portOf(t, loopback))
	e := MustOpenEdge(t, newFakeOrch(t, up, gone, bare).URL, func(c *edge.Config) { c.MapDial = edge.MapDialOverlay })
	for range 2 {
		c, seen := dialEcho(t, wsURL(e, "up-1"), nil)
		if seen["name"] != "network" {
			t.Fatalf("the edge reached the %q listener, want the map's network address", seen["name"])
		}
		echoOnce(t, c, "hello")
	}
	for _, id := range []string{"gone-1", "bare-1", "up-1"} {
		c, resp, err := websocket.DefaultDialer.Dial(wsURL(e, id), nil)
		if id == "up-1" {
			if err != nil {
				t.Fatalf("up-1 after the refusals: %v", err)
			}
			c.Close()
			continue
		}
		if err == nil {
			c.Close()
			t.Fatalf("%s: connected, want a refusal without the loopback port", id)
		}
		if resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("%s: %v (%+v), want 503", id, err, resp)
		}
	}
}

func TestEdge_Refusals(t *testing.T) {
	// A port that was open and is now closed: a ready map whose server died.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadPort := portOf(t, dead)
	dead.Close()
	// A map whose origin check refuses the page.
	strict := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = (&websocket.Upgrader{}).Upgrade(w, r, nil)
	}))
	t.Cleanup(strict.Close)
	// A map that answers its refusal with the error envelope, as maps of this version
	// do: its code and message reach the client.
	enveloped := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"error":{"code":"forbidden","message":"origin not allowed by the map"}}`)
	}))
	t.Cleanup(enveloped.Close)
	e := MustOpenEdge(t, newFakeOrch(t,
		routetable.Route{InstanceID: "quarantined-1", State: "quarantined", GamePort: 1, Code: apierr.EMAPQUARANTINED, Message: "map instance \"quarantined-1\" is quarantined"},
		routetable.Route{InstanceID: "starting-1", State: "starting", Code: apierr.EMAPUNAVAILABLE, Message: "map instance \"starting-1\" is starting"},
		ready("gone-1", deadPort),
		ready("strict-1", portOf(t, strict)),
		ready("enveloped-1", portOf(t, enveloped)),
	).URL, nil)
	for _, tc := range []struct {
		name, id string
		status   int
		code     string
		message  string // a part of the message, when it matters
	}{
		{"ErrMapUnavailableUnknown", "nowhere-1", 503, apierr.EMAPUNAVAILABLE, ""},
		{"ErrMapQuarantined", "quarantined-1", 503, apierr.EMAPQUARANTINED, ""},
		{"ErrMapUnavailableStarting", "starting-1", 503, apierr.EMAPUNAVAILABLE, ""},
		{"ErrMapUnavailableNoAnswer", "gone-1", 503, apierr.EMAPUNAVAILABLE, ""},
		{"ErrNotFoundBadID", "Not_An_Id", 404, apierr.ENOTFOUND, ""},
		{"ErrForbiddenOrigin", "strict-1", 403, apierr.EFORBIDDEN, ""},
		{"ErrForbiddenMapsOwnAnswer", "enveloped-1", 403, apierr.EFORBIDDEN, "origin not allowed by the map"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, resp, err := websocket.DefaultDialer.Dial(wsURL(e, tc.id), http.Header{"Origin": {"http://elsewhere.example"}})
			if err == nil {
				c.Close()
				t.Fatal("upgraded")
			}
			body := errorOf(t, resp, tc.status, tc.code)
			if strings.Contains(body, strconv.Itoa(deadPort)) {
				t.Fatalf("answer %s leaks the map's port", body)
			}
			if !strings.Contains(body, tc.message) {
				t.Fatalf("answer %s, want the map's message %q", body, tc.message)
			}
		})
	}
}

func TestEdge_Errors(t *testing.T) {
	orch := newFakeOrch(t)
	e := MustOpenEdge(t, orch.URL, nil)
	do := func(method, path, ctype, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, e.PublicURL()+path, strings.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	t.Run("ErrMethodNotAllowed", func(t *testing.T) {
		errorOf(t, do(http.MethodPost, public.WSPath("forest-1"), "", ""), 405, apierr.EMETHODNOTALLOWED)
		errorOf(t, do(http.MethodGet, public.PathJoin, "", ""), 405, apierr.EMETHODNOTALLOWED)
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		errorOf(t, do(http.MethodGet, "/nope.js", "", ""), 404, apierr.ENOTFOUND)
	})
	t.Run("ErrBadRequestNotAnUpgrade", func(t *testing.T) {
		orch.setRoutes("v2", ready("forest-1", 1))
		waitFor(t, "the new table", func() bool { _, ok := e.Routes.Lookup("forest-1"); return ok })
		errorOf(t, do(http.MethodGet, public.WSPath("forest-1"), "", ""), 400, apierr.EBADREQUEST)
	})
	t.Run("ErrUnsupportedMediaType", func(t *testing.T) {
		errorOf(t, do(http.MethodPost, public.PathJoin, "application/x-www-form-urlencoded", "name=ada"), 415, apierr.EUNSUPPORTEDMEDIA)
		errorOf(t, do(http.MethodPost, public.PathJoin, "text/plain", "{}"), 415, apierr.EUNSUPPORTEDMEDIA)
	})
	t.Run("ErrTooLarge", func(t *testing.T) {
		errorOf(t, do(http.MethodPost, public.PathJoin, "application/json", `{"name":"`+strings.Repeat("a", public.MaxPlayerBody)+`"}`), 413, apierr.ETOOLARGE)
	})
	t.Run("JoinForwardedWithSecret", func(t *testing.T) {
		for _, ct := range []string{"", "application/json; charset=utf-8"} {
			resp := do(http.MethodPost, public.PathJoin, ct, "")
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(body), `"ws":"/maps/forest-1/ws"`) {
				t.Fatalf("join through the edge: %d %s", resp.StatusCode, body)
			}
		}
		orch.mu.Lock()
		defer orch.mu.Unlock()
		if len(orch.joins) != 2 || orch.joins[0].Header.Get("X-Forwarded-For") != "127.0.0.1" {
			t.Fatalf("orchestrator got %d joins", len(orch.joins))
		}
	})
	t.Run("PageServed", func(t *testing.T) {
		resp := do(http.MethodGet, "/", "", "")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "mapyard") {
			t.Fatalf("GET /: %d %s", resp.StatusCode, body)
		}
	})
}

// TestEdge_OrchestratorAway: while the orchestrator does not answer, established
// connections go on, new WebSockets to maps in the last table still work, joins fail
// fast with unavailable, and readiness says so; when it is back, joins work again.
func TestEdge_OrchestratorAway(t *testing.T) {
	backend := echoBackend(t)
	orch := newFakeOrch(t, ready("forest-1", portOf(t, backend)))
	e := MustOpenEdge(t, orch.URL, nil)
	c, _ := dialEcho(t, wsURL(e, "forest-1"), nil)

	orch.setDown(true)
	waitFor(t, "the edge to see the orchestrator gone", func() bool { online, _ := e.Routes.Status(); return !online })
	echoOnce(t, c, "still here")
	c2, _ := dialEcho(t, wsURL(e, "forest-1"), nil)
	echoOnce(t, c2, "new player on a known map")
	start := time.Now()
	resp, err := http.Post(e.PublicURL()+public.PathJoin, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	errorOf(t, resp, 503, apierr.EUNAVAILABLE)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("join took %s to fail", d)
	}
	resp, err = http.Get(e.PublicURL() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	errorOf(t, resp, 503, apierr.EUNAVAILABLE)

	orch.setDown(false)
	waitFor(t, "the edge to see the orchestrator back", func() bool { online, _ := e.Routes.Status(); return online })
	resp, err = http.Post(e.PublicURL()+public.PathJoin, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("join after the orchestrator came back: %d", resp.StatusCode)
	}
	echoOnce(t, c, "never reconnected")
}

// TestEdge_RefreshOnMiss: a WebSocket for an instance the edge's copy does not know yet
// (a join just started it) fetches the table at once instead of refusing.
func TestEdge_RefreshOnMiss(t *testing.T) {
	backend := echoBackend(t)
	orch := newFakeOrch(t)
	e := MustOpenEdge(t, orch.URL, nil)
	// The table changes without waking the edge's watch (same version), as a change
	// between two polls would look.
	orch.mu.Lock()
	orch.table.Routes = []routetable.Route{ready("late-1", portOf(t, backend))}
	orch.table.Version = "v-late"
	orch.mu.Unlock()
	dialEcho(t, wsURL(e, "late-1"), nil)
}

func TestEdge_ConnectionLimit(t *testing.T) {
	backend := echoBackend(t)
	e := MustOpenEdge(t, newFakeOrch(t, ready("forest-1", portOf(t, backend))).URL, func(c *edge.Config) { c.MaxConns = 1 })
	c, _ := dialEcho(t, wsURL(e, "forest-1"), nil)
	_, resp, err := websocket.DefaultDialer.Dial(wsURL(e, "forest-1"), nil)
	if err == nil {
		t.Fatal("second connection upgraded past the limit")
	}
	errorOf(t, resp, 503, apierr.EUNAVAILABLE)
	c.Close()
	waitFor(t, "the slot to be released", func() bool { return e.Proxy.Active() == 0 })
	dialEcho(t, wsURL(e, "forest-1"), nil)
}

// TestEdge_IdleTimeout: a connection with no byte either way is closed; one where only
// the map talks (a spectator receiving snapshots) is not.
func TestEdge_IdleTimeout(t *testing.T) {
	up := websocket.Upgrader{}
	pusher := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		if r.URL.Query().Get("push") == "" {
			_, _, _ = c.ReadMessage()
			return
		}
		for i := 0; ; i++ {
			if err := c.WriteMessage(websocket.TextMessage, []byte(strconv.Itoa(i))); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}))
	t.Cleanup(pusher.Close)
	e := MustOpenEdge(t, newFakeOrch(t, ready("forest-1", portOf(t, pusher))).URL, func(c *edge.Config) { c.IdleTimeoutMS = 300 })

	quiet, _, err := websocket.DefaultDialer.Dial(wsURL(e, "forest-1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Close()
	_ = quiet.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := quiet.ReadMessage(); err == nil || websocket.IsCloseError(err) {
		t.Fatalf("idle connection: %v, want it cut", err)
	}

	busy, _, err := websocket.DefaultDialer.Dial(wsURL(e, "forest-1")+"?push=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for i := 0; i < 20; i++ { // 1 s, more than three idle timeouts
		_ = busy.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, _, err := busy.ReadMessage(); err != nil {
			t.Fatalf("receive-only connection cut after %d messages: %v", i, err)
		}
	}
}

// TestEdge_Drain: Close stops accepting at once but leaves open connections working
// until they end or the drain timeout passes.
func TestEdge_Drain(t *testing.T) {
	backend := echoBackend(t)
	e := MustOpenEdge(t, newFakeOrch(t, ready("forest-1", portOf(t, backend))).URL, func(c *edge.Config) { c.DrainTimeoutMS = 700 })
	c, _ := dialEcho(t, wsURL(e, "forest-1"), nil)
	closed := make(chan error, 1)
	start := time.Now()
	go func() { closed <- e.Close(context.Background()) }()
	waitFor(t, "the listener to close", func() bool {
		conn, err := net.DialTimeout("tcp", strings.TrimPrefix(e.PublicURL(), "http://"), time.Second)
		if err == nil {
			conn.Close()
		}
		return err != nil
	})
	echoOnce(t, c, "draining but alive")
	if err := <-closed; err == nil {
		t.Fatal("Close reported no connection cut at the drain timeout")
	}
	if d := time.Since(start); d < 700*time.Millisecond {
		t.Fatalf("drain ended after %s, before its timeout", d)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := c.ReadMessage(); err == nil {
		t.Fatal("connection still open after the drain")
	}
}

func TestEdge_Metrics(t *testing.T) {
	backend := echoBackend(t)
	e := MustOpenEdge(t, newFakeOrch(t, ready("forest-1", portOf(t, backend))).URL, nil)
	c, _ := dialEcho(t, wsURL(e, "forest-1"), nil)
	echoOnce(t, c, strings.Repeat("m", 1000))
	resp, err := http.Get(e.MetricsURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		"mapyard_edge_ws_connections 1", "mapyard_edge_orchestrator_up 1",
		`mapyard_edge_ws_bytes_total{direction="client_to_map"}`, `mapyard_edge_ws_bytes_total{direction="map_to_client"}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	c.Close()
	waitFor(t, "the connection's histogram", func() bool {
		resp, err := http.Get(e.MetricsURL() + "/metrics")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.Contains(string(body), `mapyard_edge_ws_connection_bytes_count{direction="client_to_map"} 1`)
	})
}

// TestEdge_CharacterAPIForwarded checks that the edge forwards the character API to the
// orchestrator with its method, path, the player's Authorization header and the secret;
// passes a player's 401 on with its Bearer challenge; and answers a DELETE's 204 as is.
func TestEdge_CharacterAPIForwarded(t *testing.T) {
	orch := newFakeOrch(t)
	e := MustOpenEdge(t, orch.URL, nil)
	call := func(method, path, auth, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, e.PublicURL()+path, strings.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	const auth = "Bearer Zq3v9LrT0pXw2YbN5cHs8KdA"
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, public.PathCharacters, ""},
		{http.MethodPost, public.PathCharacters, `{"name":"Ada"}`},
		{http.MethodPost, public.PathCharacters + "/c1/select", ""},
	} {
		resp, body := call(c.method, c.path, auth, c.body)
		if want := fmt.Sprintf(`{"method":%q,"path":%q}`, c.method, c.path); resp.StatusCode != 200 || body != want {
			t.Fatalf("%s %s through the edge: %d %s, want %s", c.method, c.path, resp.StatusCode, body, want)
		}
	}
	if resp, body := call(http.MethodDelete, public.PathCharacters+"/c1", auth, ""); resp.StatusCode != http.StatusNoContent || body != "" {
		t.Fatalf("DELETE through the edge: %d %q", resp.StatusCode, body)
	}
	resp, err := http.Get(e.PublicURL() + public.PathCharacters)
	if err != nil {
		t.Fatal(err)
	}
	errorOf(t, resp, http.StatusUnauthorized, apierr.EUNAUTHORIZED)
	if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("the player's 401 lost its challenge: %v", resp.Header)
	}
	orch.mu.Lock()
	defer orch.mu.Unlock()
	if len(orch.joins) != 5 || orch.joins[0].Header.Get("Authorization") != auth || orch.joins[0].Header.Get("X-Forwarded-For") != "127.0.0.1" {
		t.Fatalf("the orchestrator got %d calls, the first with Authorization %q", len(orch.joins), orch.joins[0].Header.Get("Authorization"))
	}
}
