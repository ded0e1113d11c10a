// Command brokenmap is a map server that breaks the map contract on purpose, the
// conformance kit's test fixture: the kit must fail it on exactly the checks of the
// rules it breaks, and pass it on the others. It is small and complete otherwise: it
// registers (as a blank pool map too), heartbeats, serves /health and start-instance,
// redeems tickets once, welcomes players, sends format-2 snapshots, answers pings and
// re-registers after an orchestrator restart. What it breaks:
//
//   - its image runs as root (the test's Dockerfile has no USER);
//   - its control listener takes requests without a credential, or with any;
//   - it stamps every push with revision 1, so revisions never grow;
//   - it ignores SIGTERM: no close, no final push, killed after the grace;
//   - it writes a file at start (and ignores the error a read-only root gives).
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

const version = "brokenmap-1"

type player struct {
	id    string
	epoch int64
	x, y  float64
	attrs json.RawMessage
	wmu   sync.Mutex
	ws    *websocket.Conn
}

func (p *player) write(typ int, b []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_ = p.ws.SetWriteDeadline(time.Now().Add(2 * time.Second))
	return p.ws.WriteMessage(typ, b)
}

type server struct {
	orch, cred string
	hc         *http.Client

	mu       sync.Mutex
	instance string
	mapID    string
	pool     bool
	config   json.RawMessage
	world    *mapgen.World
	players  map[string]*player
	tick     uint64
	register chan struct{}
}

func main() {
	signal.Ignore(syscall.SIGTERM) // broken: a stop is a kill after the grace
	_ = os.WriteFile("/state/started", []byte(time.Now().String()), 0o600)
	s := &server{orch: os.Getenv("MAP_ORCH_URL"), cred: os.Getenv("MAP_CREDENTIAL"), hc: &http.Client{Timeout: 5 * time.Second},
		instance: os.Getenv("MAP_INSTANCE_ID"), mapID: os.Getenv("MAP_MAP_ID"), players: map[string]*player{}, register: make(chan struct{}, 1)}
	if id := os.Getenv("MAP_POOL_ID"); id != "" {
		s.instance, s.mapID, s.pool = id, "", true
	}
	ctl := http.NewServeMux()
	ctl.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, s.health()) })
	ctl.HandleFunc("POST /control/start-instance", s.startInstance)
	game := http.NewServeMux()
	game.HandleFunc("GET /ws", s.serveWS)
	go func() { log.Fatal(http.ListenAndServe(":9100", ctl)) }()
	go func() { log.Fatal(http.ListenAndServe(":7000", game)) }()
	s.register <- struct{}{}
	go s.registerLoop()
	go s.every(envMS("MAP_HEARTBEAT_MS", 5000), s.heartbeat)
	go s.every(envMS("MAP_SNAPSHOT_PUSH_MS", 10000), s.pushAll)
	s.every(100*time.Millisecond, s.snapshots)
}

func envMS(name string, def int) time.Duration {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		def = n
	}
	return time.Duration(def) * time.Millisecond
}

func (s *server) every(d time.Duration, f func()) {
	for range time.Tick(d) {
		f()
	}
}

// call posts body to the orchestrator and returns the status and answer (0 when none).
func (s *server) call(path string, body any) (int, []byte) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, s.orch+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Mapyard-Secret", s.cred)
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes()
}

func (s *server) registerLoop() {
	for range s.register {
		for {
			s.mu.Lock()
			r := mapcontract.MapReady{InstanceID: s.instance, MapID: s.mapID, GamePort: 7000, ControlPort: 9100, Version: version}
			s.mu.Unlock()
			status, answer := s.call(mapcontract.PathMapReady, r)
			var a mapcontract.HeartbeatAnswer
			if status == 200 && json.Unmarshal(answer, &a) == nil && a.Registered {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

func (s *server) reregister() {
	select {
	case s.register <- struct{}{}:
	default:
	}
}

func (s *server) heartbeat() {
	s.mu.Lock()
	h := mapcontract.Heartbeat{InstanceID: s.instance, Players: len(s.players), Tick: s.tick}
	s.mu.Unlock()
	status, answer := s.call(mapcontract.PathMapHeartbeat, h)
	var a mapcontract.HeartbeatAnswer
	if status == 200 && json.Unmarshal(answer, &a) == nil && !a.Registered {
		s.reregister()
	}
}

// pushAll pushes every player's state, always at revision 1: the broken rule.
func (s *server) pushAll() {
	s.mu.Lock()
	var pushes []mapcontract.PersistSnapshot
	for _, p := range s.players {
		payload, _ := json.Marshal(record.CharacterStatePayload{MapID: s.mapID, InstanceID: s.instance, X: p.x, Y: p.y, Attributes: p.attrs})
		sum := sha256.Sum256(payload)
		pushes = append(pushes, mapcontract.PersistSnapshot{InstanceID: s.instance, Partition: record.CharacterPartitionPrefix + p.id,
			Revision: 1, Epoch: p.epoch, Envelope: record.SnapshotEnvelope{SchemaVersion: 1, SimCoreVersion: version,
				PayloadHash: hex.EncodeToString(sum[:]), MapTick: int64(s.tick), ServerTimeMs: time.Now().UnixMilli(), Payload: payload}})
	}
	s.mu.Unlock()
	for _, p := range pushes {
		s.call(mapcontract.PathPersistSnapshot, p)
	}
}

// snapshots steps the tick and sends every player a full format-2 snapshot of itself.
func (s *server) snapshots() {
	s.mu.Lock()
	s.tick++
	tick := s.tick
	players := make([]*player, 0, len(s.players))
	for _, p := range s.players {
		players = append(players, p)
	}
	s.mu.Unlock()
	for _, p := range players {
		b := []byte{0x04}
		b = binary.AppendUvarint(b, tick)
		b = binary.AppendUvarint(b, 0) // seq
		b = binary.AppendUvarint(b, 1) // self: slot 0
		b = binary.AppendUvarint(b, 0) // despawns
		b = binary.AppendUvarint(b, 1) // spawns
		b = binary.AppendUvarint(b, 0) // slot gap
		b = append(b, 1)               // a player
		b = binary.AppendUvarint(b, 1)
		b = binary.AppendVarint(b, int64(p.x*16))
		b = binary.AppendVarint(b, int64(p.y*16))
		b = binary.AppendUvarint(b, 0) // no fields
		b = binary.AppendUvarint(b, 0) // updates
		_ = p.write(websocket.BinaryMessage, b)
	}
}

func (s *server) health() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := map[string]string{"status": "ok", "instanceId": s.instance, "mapId": s.mapID, "version": version}
	if s.world != nil {
		h["worldHash"] = s.world.Hash()
	}
	return h
}

// startInstance takes on an instance; it never asks for a credential (broken).
func (s *server) startInstance(w http.ResponseWriter, r *http.Request) {
	var req struct {
		InstanceID string          `json:"instanceId"`
		MapID      string          `json:"mapId"`
		Config     json.RawMessage `json:"config"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, 400, "bad_request", err.Error())
		return
	}
	cfg, err := mapgen.Parse(req.Config)
	if err == nil && (cfg.InstanceID != req.InstanceID || cfg.MapID != req.MapID) {
		err = os.ErrInvalid
	}
	if err != nil {
		writeError(w, 400, "bad_request", "config: "+err.Error())
		return
	}
	s.mu.Lock()
	switch {
	case s.world != nil && s.instance == req.InstanceID:
		s.mu.Unlock()
		writeJSON(w, 200, s.health())
		return
	case !s.pool && s.instance != req.InstanceID:
		s.mu.Unlock()
		writeError(w, 409, "conflict", "this map runs "+s.instance)
		return
	}
	world, err := mapgen.Generate(cfg)
	if err != nil {
		s.mu.Unlock()
		writeError(w, 400, "bad_request", err.Error())
		return
	}
	wasPool := s.pool
	s.instance, s.mapID, s.pool, s.config, s.world = req.InstanceID, req.MapID, false, req.Config, world
	s.mu.Unlock()
	writeJSON(w, 200, s.health())
	if wasPool {
		s.reregister()
	}
}

func (s *server) serveWS(w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	refuse := func(code, msg string, close int) {
		b, _ := json.Marshal(map[string]any{"v": 1, "kind": "error", "code": code, "message": msg})
		_ = ws.WriteMessage(websocket.TextMessage, b)
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(close, code), time.Now().Add(time.Second))
	}
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hello struct {
		Kind   string `json:"kind"`
		Ticket string `json:"ticket"`
	}
	if _, data, err := ws.ReadMessage(); err != nil || json.Unmarshal(data, &hello) != nil || hello.Kind != "hello" || hello.Ticket == "" {
		refuse("bad_request", "the first message must be a hello with a ticket", websocket.ClosePolicyViolation)
		return
	}
	s.mu.Lock()
	instance, mapID, config, world := s.instance, s.mapID, s.config, s.world
	s.mu.Unlock()
	if world == nil {
		refuse("map_unavailable", "no world yet", websocket.CloseTryAgainLater)
		return
	}
	status, answer := s.call(mapcontract.PathRedeem, mapcontract.RedeemRequest{InstanceID: instance, Token: hello.Ticket})
	var res mapcontract.RedeemResult
	if status != 200 || json.Unmarshal(answer, &res) != nil {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if status == 0 || json.Unmarshal(answer, &e) != nil || e.Error.Code == "" {
			refuse("map_unavailable", "the orchestrator did not answer", websocket.CloseTryAgainLater)
			return
		}
		refuse(e.Error.Code, e.Error.Message, websocket.ClosePolicyViolation)
		return
	}
	p := &player{id: res.CharacterID, epoch: res.Epoch, ws: ws, x: float64(world.Spawns[0].X) / 100, y: float64(world.Spawns[0].Y) / 100}
	if st := res.State; st != nil {
		p.attrs = st.Attributes
		if st.MapID == mapID {
			p.x, p.y = st.X, st.Y
		}
	}
	welcome, _ := json.Marshal(map[string]any{"v": 1, "kind": "welcome", "characterId": p.id, "instanceId": instance, "mapId": mapID,
		"epoch": p.epoch, "worldHash": world.Hash(), "tickHz": 10, "snapshotHz": 10, "mapConfig": config, "snapshotFormat": 2})
	if p.write(websocket.TextMessage, welcome) != nil {
		return
	}
	_ = ws.SetReadDeadline(time.Time{})
	s.mu.Lock()
	s.players[p.id] = p
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.players[p.id] == p {
			delete(s.players, p.id)
		}
		s.mu.Unlock()
	}()
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var m struct {
			Kind string      `json:"kind"`
			T    json.Number `json:"t"`
		}
		if json.Unmarshal(data, &m) == nil && m.Kind == "ping" {
			b, _ := json.Marshal(map[string]any{"v": 1, "kind": "pong", "t": m.T})
			_ = p.write(websocket.TextMessage, b)
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}
