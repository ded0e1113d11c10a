package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/docs/schemas"
	"github.com/mapyard/mapyard/mapserver/app"
	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapenv"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator/fake/faketest"
)

// captured is one real message: the schema it must obey and its bytes.
type captured struct {
	schema, what string
	doc          []byte
}

// capture collects real messages of both contracts as they cross the wire.
type capture struct {
	mu   sync.Mutex
	msgs []captured
	errs []string
}

func (c *capture) add(schema, what string, doc []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, captured{schema, what, append([]byte(nil), doc...)})
}

func (c *capture) fail(format string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, format)
}

// seen reports whether a message of schema was captured.
func (c *capture) seen(schema string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.msgs, func(m captured) bool { return m.schema == schema })
}

// RoundTrip records a contract call (its request body, and its answer under the 2xx
// answer's schema or the error schema) as it passes to base.
type recordingTransport struct {
	c    *capture
	base http.RoundTripper
}

func (t recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	reqSchema, ansSchema, ok := schemas.ForRoute(r.URL.Path)
	if !ok {
		t.c.fail("a call to " + r.URL.Path + ", which is no route of the contract")
	}
	if r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if ok && reqSchema != "" {
			t.c.add(reqSchema, r.Method+" "+r.URL.Path, body)
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if ok && resp.StatusCode/100 != 2 {
		ansSchema = schemas.ErrorAnswer
	}
	if ok {
		t.c.add(ansSchema, resp.Status+" to "+r.URL.Path, body)
	}
	return resp, nil
}

// openRecordingProxy stands between maps and the fake orchestrator's control listener
// and records what passes.
func openRecordingProxy(t *testing.T, c *capture, f *fakeOrch) string {
	t.Helper()
	target, err := url.Parse(f.HTTP.ControlURL())
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = recordingTransport{c, http.DefaultTransport}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}

// openRelay plays the edge for the player protocol: /maps/{instanceId}/ws reaches that
// map's WebSocket, and every JSON frame both ways is recorded under its kind's schema.
func openRelay(t *testing.T, c *capture, maps map[string]*app.Main) string {
	t.Helper()
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/maps/"), "/ws")
		m := maps[id]
		if m == nil {
			http.NotFound(w, r)
			return
		}
		to, _, err := websocket.DefaultDialer.Dial(m.GameURL()+mapcontract.GamePath, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		from, err := up.Upgrade(w, r, nil)
		if err != nil {
			to.Close()
			return
		}
		go pump(c, "client", from, to)
		pump(c, "map", to, from)
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// playerSchemas names the schema of each JSON message kind, by sender.
var playerSchemas = map[string]map[string]string{
	"client": {"hello": "player/hello.json", "resume": "player/hello.json", "command": "player/command.json",
		"ack": "player/client-ack.json", "ping": "player/ping.json"},
	"map": {"welcome": "player/welcome.json", "ack": "player/ack.json", "event": "player/event.json",
		"transfer": "player/transfer.json", "pong": "player/pong.json", "error": "player/error.json"},
}

// pump copies frames from src to dst, recording the JSON ones sent by sender, and
// passes the close on.
func pump(c *capture, sender string, src, dst *websocket.Conn) {
	defer dst.Close()
	for {
		typ, data, err := src.ReadMessage()
		if err != nil {
			// A close is passed on with its code; a connection that broke breaks the
			// other one (the deferred Close), as a dropped player's would.
			var ce *websocket.CloseError
			if errors.As(err, &ce) && ce.Code != websocket.CloseAbnormalClosure && ce.Code != websocket.CloseNoStatusReceived {
				_ = dst.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(ce.Code, ""), time.Now().Add(time.Second))
			}
			return
		}
		if typ == websocket.TextMessage {
			var head struct{ Kind string }
			_ = json.Unmarshal(data, &head)
			if name := playerSchemas[sender][head.Kind]; name != "" {
				c.add(name, sender+" "+head.Kind, data)
				c.add("player/from-"+sender+".json", sender+" "+head.Kind, data)
			} else {
				c.fail(sender + " sent a message of unknown kind: " + string(data))
			}
		}
		if err := dst.WriteMessage(typ, data); err != nil {
			return
		}
	}
}

// TestSchemas_RealMessages runs two maps in-process against the fake orchestrator,
// with a recording proxy on the map contract both ways and a recording relay in front
// of the players, and drives the Go client through a join, items, a refused command, a
// resume, a refused ticket and a portal. Every message captured must obey the schema
// docs/schemas gives it; every schema must have met a real message; and each schema
// must refuse that message without any one of its required fields.
func TestSchemas_RealMessages(t *testing.T) {
	set, err := schemas.Load()
	if err != nil {
		t.Fatal(err)
	}
	c := &capture{}
	f := mustOpenFakeOrch(t)
	f.Maps.RPC.HTTP.Transport = recordingTransport{c, f.Maps.RPC.HTTP.Transport}
	orchURL := openRecordingProxy(t, c, f)
	src := mustOpenMap(t, f, func(cfg *mapenv.Config) { cfg.OrchURL, cfg.SnapshotPushMS = orchURL, 200 })
	dst := mustOpenMap(t, f, func(cfg *mapenv.Config) {
		cfg.InstanceID, cfg.MapID, cfg.OrchURL = "frontier-1", "frontier", orchURL
	})
	relay := openRelay(t, c, map[string]*app.Main{"dev-1": src, "frontier-1": dst})
	ctx := context.Background()

	// A player beside an item: pickup, ping, a walk, a refused command, a resume.
	list, err := f.DB.InstanceItems(ctx, "dev-1", nil)
	if err != nil || len(list) == 0 {
		t.Fatalf("the map seeded no items: %v", err)
	}
	it := list[0]
	j := saveAndJoin(t, f, "Sch3maK3yAbCdEfGhIjKlMnOp", float64(it.Place.X)/100, float64(it.Place.Y)/100)
	p, err := client.Dial(ctx, relay+"/maps/dev-1/ws", client.Hello{Ticket: j.Ticket}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Command("items", "pickup", map[string]string{"itemId": it.ID}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, p, "item_picked")
	if _, err := p.Command("items", "pickup", map[string]string{"itemId": "no-such-item"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Ping(); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := p.Move(1, 0); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "a pong, an error, snapshot acks and pushes", func() bool {
		return c.seen("player/pong.json") && c.seen("player/error.json") && c.seen("player/client-ack.json") &&
			c.seen("orch/persist-snapshot.answer.json")
	})
	token := p.Welcome().ResumeToken
	p.Drop()
	p, err = client.Dial(ctx, relay+"/maps/dev-1/ws", client.Hello{Resume: token}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := client.Dial(ctx, relay+"/maps/dev-1/ws", client.Hello{Ticket: j.Ticket}, client.Options{}); err == nil {
		t.Fatal("a used ticket was accepted")
	}

	// A player walking through the portal to frontier: transfer, hello with the token.
	var portal mapgen.Portal
	for _, q := range src.World().Portals {
		if q.TargetMapID == "frontier" {
			portal = q
		}
	}
	k := saveAndJoin(t, f, "P0rtalSch3maAbCdEfGhIjKl", float64(portal.X-portal.Radius)/100-1, float64(portal.Y)/100)
	w, err := client.Dial(ctx, relay+"/maps/dev-1/ws", client.Hello{Ticket: k.Ticket}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	waitFor(t, "the walker to arrive on frontier", func() bool {
		_, _ = w.Move(1, 0)
		time.Sleep(20 * time.Millisecond)
		return w.Welcome().InstanceID == "frontier-1"
	})
	waitFor(t, "the transfer's result", func() bool { return c.seen("orch/transfer-result.answer.json") })

	// The orchestrator's probe, and the calls mapyard's map makes only sometimes.
	mapCred, orchCred := faketest.Credentials(t, "dev-1")
	if _, err := f.Maps.RPC.Health(ctx, src.ControlURL(), orchCred); err != nil {
		t.Fatal(err)
	}
	mc := mapcontract.NewClient(orchURL, mapCred)
	if _, err := mc.ItemPolicies(ctx, mapcontract.ItemPoliciesRequest{InstanceID: "dev-1"}); err != nil {
		t.Fatal(err)
	}
	// A redeem answers the character's items, so mapyard's map asks for them apart only
	// of an orchestrator that does not.
	if _, err := mc.CharacterItems(ctx, mapcontract.CharacterItemsRequest{InstanceID: "dev-1", CharacterID: j.CharacterID, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	quest := record.CriticalEvent{EventID: "dev-1/quest/1", InstanceID: "dev-1", Kind: "quest_completed",
		MapTick: int64(src.Loop.Tick()), Payload: json.RawMessage(`{"characterId":"` + j.CharacterID + `","quest":"first-steps"}`)}
	if _, err := mc.PersistCritical(ctx, quest); err != nil {
		t.Fatal(err)
	}
	// A batch holds what several players caused while a request was in flight: one
	// event new, one a repeat (its ack says duplicate), one refused (an item the map
	// does not hold).
	batch := mapcontract.CriticalBatch{InstanceID: "dev-1", Events: []record.CriticalEvent{quest, quest, {
		EventID: "dev-1/drop/1", InstanceID: "dev-1", Kind: "item_drop", MapTick: int64(src.Loop.Tick()),
		Payload: json.RawMessage(`{"itemId":"no-such-item","templateId":"apple","quantity":1,"from":{"characterId":"` + j.CharacterID + `"},"to":{"instanceId":"dev-1","x":100,"y":200}}`),
		Epochs:  map[string]int64{j.CharacterID: 1},
	}}}
	batch.Events[0].EventID = "dev-1/quest/2"
	if _, err := mc.PersistCriticalBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	// A live upgrade's handoff of frontier, which holds the walker (an orchestrator that
	// does not upgrade the instance refuses the handoff transfer: the walker stays).
	_, dstCred := faketest.Credentials(t, "frontier-1")
	if _, err := f.Maps.RPC.Handoff(ctx, dst.ControlURL(), dstCred, mapcontract.Handoff{Generation: "g-2"}); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil { // the final push of a stopping map
		t.Fatal(err)
	}

	checkCaptured(t, set, c)
}

// saveAndJoin saves a character of authKey at (x, y) units on dev-1 and joins it.
func saveAndJoin(t *testing.T, f *fakeOrch, authKey string, x, y float64) (j public.JoinResponse) {
	t.Helper()
	j = f.join(t, `{"authKey":"`+authKey+`"}`)
	payload, _ := json.Marshal(record.CharacterStatePayload{MapID: mapgen.DefaultMapID, InstanceID: "dev-1", X: x, Y: y})
	env := record.NewSnapshotEnvelope("test", 1, time.Now().UnixMilli(), payload)
	if _, err := f.DB.PutSnapshot(context.Background(), "dev-1", record.CharacterPartition(j.CharacterID), 1, env); err != nil {
		t.Fatal(err)
	}
	return j
}

// waitEvent waits for the client's next event called name.
func waitEvent(t *testing.T, p *client.Client, name string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-p.Events():
			if e.Event != nil && e.Event.Name == name {
				return
			}
		case <-timeout:
			t.Fatalf("no %s event", name)
		}
	}
}

// checkCaptured validates every captured message, checks that every schema met one,
// and that each schema refuses its first message without any one required field.
func checkCaptured(t *testing.T, set *schemas.Set, c *capture) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.errs {
		t.Error(e)
	}
	first := map[string][]byte{}
	for _, m := range c.msgs {
		if err := set.Validate(m.schema, m.doc); err != nil {
			t.Errorf("%s: %s\n%v", m.what, m.doc, err)
			continue
		}
		if props := set.Properties(m.schema); len(props) > 0 {
			var fields map[string]json.RawMessage
			_ = json.Unmarshal(m.doc, &fields)
			for k := range fields {
				if !slices.Contains(props, k) {
					t.Errorf("%s carries %q, which %s does not declare: %s", m.what, k, m.schema, m.doc)
				}
			}
		}
		if first[m.schema] == nil {
			first[m.schema] = m.doc
		}
	}
	if first[schemas.ErrorAnswer] == nil {
		t.Errorf("no error answer was checked against %s", schemas.ErrorAnswer)
	}
	for _, name := range schemas.Names() {
		if strings.HasPrefix(name, "common/") {
			continue // reached through the messages that refer to them
		}
		doc := first[name]
		if doc == nil {
			t.Errorf("no real message was checked against %s", name)
			continue
		}
		for _, field := range set.Required(name) {
			without, err := schemas.WithoutField(doc, field)
			if err != nil {
				t.Fatal(err)
			}
			if set.Validate(name, without) == nil {
				t.Errorf("%s accepts a message without its required %q: %s", name, field, without)
			}
		}
	}
}
