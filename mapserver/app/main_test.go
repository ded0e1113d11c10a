package app_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/app"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapenv"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator/fake/faketest"
)

// fakeOrch is the fake orchestrator in-process.
type fakeOrch struct{ *faketest.Orch }

func mustOpenFakeOrch(t *testing.T) *fakeOrch { return &fakeOrch{faketest.MustOpenOrch(t)} }

func (f *fakeOrch) join(t *testing.T, body string) public.JoinResponse { return f.Join(t, body) }

// mustOpenMap starts a map server in-process against f, waiting until it registered
// and generated its world.
func mustOpenMap(t *testing.T, f *fakeOrch, tune func(*mapenv.Config)) *app.Main {
	t.Helper()
	cfg := mapenv.Config{
		InstanceID: "dev-1", MapID: "default", OrchURL: f.HTTP.ControlURL(),
		ListenHost: "127.0.0.1", HeartbeatMS: 200, SnapshotPushMS: 10000, TickHz: 30, SnapshotHz: 15,
		ResumeTTLMS: 10000, LogLevel: "info",
	}
	if tune != nil {
		tune(&cfg)
	}
	if cfg.Credential == "" { // the credentials the fake orchestrator gives the instance
		cfg.Credential, cfg.OrchCredential = faketest.Credentials(t, cfg.InstanceID)
	}
	m := &app.Main{Config: cfg, Log: slog.New(slog.DiscardHandler)}
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	waitFor(t, "the map to register and generate its world", func() bool {
		return f.Maps.Registered(cfg.InstanceID) && m.Loop.Ready()
	})
	return m
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	faketest.WaitFor(t, what, cond)
}

// player is a real WebSocket client of the map.
type player struct {
	t *testing.T
	c *websocket.Conn
	// inventories holds the "inventory" events next skipped, oldest first; held the
	// other JSON messages nextInventory skipped, for next.
	inventories []map[string]any
	held        []map[string]any
}

func dialMap(t *testing.T, m *app.Main) *player {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial(m.GameURL()+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &player{t: t, c: c}
}

func (p *player) send(msg string) {
	p.t.Helper()
	if err := p.c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		p.t.Fatal(err)
	}
}

// next returns the next JSON message, skipping binary snapshots, NPC state changes and
// inventory events (kept for nextInventory).
func (p *player) next() map[string]any {
	p.t.Helper()
	if len(p.held) > 0 {
		m := p.held[0]
		p.held = p.held[1:]
		return m
	}
	for {
		m := p.read()
		if m["kind"] == "event" && m["name"] == "inventory" {
			p.inventories = append(p.inventories, m["data"].(map[string]any))
			continue
		}
		return m
	}
}

// nextInventory returns the data of the next "inventory" event, keeping the other JSON
// messages it reads on the way for next.
func (p *player) nextInventory() map[string]any {
	p.t.Helper()
	for len(p.inventories) == 0 {
		m := p.read()
		if m["kind"] == "event" && m["name"] == "inventory" {
			return m["data"].(map[string]any)
		}
		p.held = append(p.held, m)
	}
	m := p.inventories[0]
	p.inventories = p.inventories[1:]
	return m
}

// read returns the next JSON message but NPC state changes, skipping binary snapshots.
func (p *player) read() map[string]any {
	p.t.Helper()
	_ = p.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		typ, data, err := p.c.ReadMessage()
		if err != nil {
			p.t.Fatalf("read: %v", err)
		}
		if typ == websocket.BinaryMessage {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			p.t.Fatalf("decode %s: %v", data, err)
		}
		if m["kind"] == "event" && m["name"] == "npc_state" {
			continue // NPCs noticing the player: not what these tests wait for
		}
		return m
	}
}

func (p *player) wantClose(code int) {
	p.t.Helper()
	_ = p.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := p.c.ReadMessage(); err != nil {
			if !websocket.IsCloseError(err, code) {
				p.t.Fatalf("connection ended with %v, want close %d", err, code)
			}
			return
		}
	}
}

// metrics returns the map's /metrics page.
func metrics(t *testing.T, m *app.Main) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, m.ControlURL()+httpkit.PathMetrics, nil)
	_, orchCred := faketest.Credentials(t, m.Config.InstanceID)
	req.Header.Set(httpkit.SecretHeader, orchCred)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics: %d %s", resp.StatusCode, body)
	}
	return string(body)
}

func TestMain_JoinResumeAndStop(t *testing.T) {
	f := mustOpenFakeOrch(t)
	m := mustOpenMap(t, f, nil)

	j := f.join(t, `{"name":"ada"}`)
	p := dialMap(t, m)
	p.send(`{"v":1,"kind":"hello","ticket":"` + j.Ticket + `"}`)
	w := p.next()
	if w["kind"] != "welcome" || w["characterId"] != j.CharacterID || w["instanceId"] != "dev-1" || w["worldHash"] != m.World().Hash() {
		t.Fatalf("welcome %v", w)
	}
	token, _ := w["resumeToken"].(string)
	if token == "" {
		t.Fatal("welcome without resumeToken")
	}
	p.send(`{"v":1,"kind":"ping","t":5}`)
	if pong := p.next(); pong["kind"] != "pong" || pong["t"] != float64(5) {
		t.Fatalf("got %v, want pong", pong)
	}
	waitFor(t, "the heartbeat's player count", func() bool { return m.Loop.Players() == 1 })

	t.Run("MetricsNeedSecret", func(t *testing.T) {
		resp, err := http.Get(m.ControlURL() + httpkit.PathMetrics)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("metrics without secret: %d, want 401", resp.StatusCode)
		}
		var body string
		waitFor(t, "the players gauge", func() bool {
			body = metrics(t, m)
			return strings.Contains(body, "mapyard_map_players 1")
		})
		for _, name := range []string{
			"mapyard_map_tick_duration_seconds", "mapyard_map_tick_interval_seconds", "mapyard_map_tick_overruns_total",
			"mapyard_map_players 1", "mapyard_map_entities", "mapyard_map_dropped_clients_total",
		} {
			if !strings.Contains(body, name) {
				t.Errorf("metrics lack %s", name)
			}
		}
	})

	outer := t
	t.Run("ResumeOnce", func(t *testing.T) {
		p.c.Close()
		r := dialMap(outer, m) // it outlives this subtest
		r.send(`{"v":1,"kind":"hello","resume":"` + token + `"}`)
		w2 := r.next()
		if w2["kind"] != "welcome" || w2["resumed"] != true || w2["characterId"] != j.CharacterID {
			t.Fatalf("resume welcome %v", w2)
		}
		again := dialMap(t, m)
		again.send(`{"v":1,"kind":"hello","resume":"` + token + `"}`)
		if e := again.next(); e["kind"] != "error" || e["code"] != apierr.ETICKETINVALID {
			t.Fatalf("second resume: %v", e)
		}
		again.wantClose(websocket.ClosePolicyViolation)
		p = r
	})

	t.Run("CloseSendsGoingAway", func(t *testing.T) {
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		p.t = t
		p.wantClose(websocket.CloseGoingAway)
	})
}
