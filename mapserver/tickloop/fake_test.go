package tickloop_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// fakeGame is a tiny game: characters stand on a line at X and move by the dx of their
// inputs; "test"/"portal" makes the character enter a portal at the next step,
// "test"/"reject" is refused, "test"/"quiet" is answered with an event of the game's
// own instead of an ack, and "test"/"pickup" and "test"/"give" need a critical event
// (critical_test.go). Its views write JSON snapshots saying whether they are full or a
// delta against the acknowledged tick.
type fakeGame struct {
	tick    uint64
	chars   map[string]*fakeChar
	portals []string
	// StepDelay stalls the step of the given tick once (a late tick).
	stallAt  uint64
	stallFor time.Duration
	// padFor gets snapshots fattened by padBytes (to fill a slow client's buffers).
	padFor   string
	padBytes int

	// greet follows every welcome with a "greeting" event.
	greet bool
	// criticals are events Step hands the kit on its own (a maintenance pass).
	criticals []record.CriticalEvent
	// settled are the answers Settle was given, by event id.
	settled map[string]error
	// presence is what the kit told the game of each character, in order.
	presence map[string][]gameapi.Presence

	mu    sync.Mutex
	steps []time.Time
	// spawned counts the characters spawned; the nth is entity 100+n.
	spawned uint64
}

type fakeChar struct {
	entity  uint64
	x       float64
	lastIn  uint64
	pending []fakeInput
	attrs   json.RawMessage
	held    bool
}

type fakeInput struct {
	Seq uint64  `json:"seq"`
	DX  float64 `json:"dx"`
}

type portalCmd struct{}

func newFakeGame() *fakeGame {
	return &fakeGame{chars: make(map[string]*fakeChar), settled: make(map[string]error), presence: make(map[string][]gameapi.Presence)}
}

var _ gameapi.Game = (*fakeGame)(nil)

func (g *fakeGame) Decode(feature, action string, payload json.RawMessage) (any, error) {
	switch feature + "/" + action {
	case "movement/input_batch":
		var p struct {
			Inputs []fakeInput `json:"inputs"`
		}
		if err := json.Unmarshal(payload, &p); err != nil || len(p.Inputs) == 0 {
			return nil, apierr.Errorf(apierr.EBADREQUEST, "payload must be {\"inputs\":[...]}")
		}
		return p.Inputs, nil
	case "test/portal":
		return portalCmd{}, nil
	case "test/reject":
		return "reject", nil
	case "test/other":
		return "other", nil
	case "test/quiet":
		return "quiet", nil
	case "test/pickup":
		var p pickupCmd
		_ = json.Unmarshal(payload, &p)
		return p, nil
	case "test/give":
		var g giveCmd
		if err := json.Unmarshal(payload, &g); err != nil {
			return nil, apierr.Errorf(apierr.EBADREQUEST, "payload must be {\"to\":...}")
		}
		return g, nil
	}
	return nil, apierr.Errorf(apierr.ENOTIMPLEMENTED, "unknown command %s/%s", feature, action)
}

func (g *fakeGame) Join(a gameapi.Arrival) (uint64, error) {
	if a.CharacterID == "char-refused" {
		return 0, fmt.Errorf("no room for %s", a.CharacterID)
	}
	g.spawned++
	c := &fakeChar{x: 100, entity: 100 + g.spawned}
	if a.State != nil {
		c.x, c.attrs = a.State.X, a.State.Attributes
	}
	g.chars[a.CharacterID] = c
	return c.entity, nil
}

func (g *fakeGame) Command(id string, seq uint64, cmd any, out gameapi.Out) gameapi.Reply {
	c := g.chars[id]
	switch v := cmd.(type) {
	case []fakeInput:
		c.pending = append(c.pending, v...)
		return gameapi.Reply{Quiet: true}
	case portalCmd:
		g.portals = append(g.portals, id)
	case pickupCmd, giveCmd:
		return g.critical(id, v)
	case string:
		switch v {
		case "reject":
			return gameapi.Reply{Err: apierr.Errorf(apierr.ECONFLICT, "refused")}
		case "quiet":
			out.Notify([]byte(fmt.Sprintf(`{"v":1,"kind":"event","name":"quiet","data":{"seq":%d}}`, seq)), []string{id})
			return gameapi.Reply{Quiet: true}
		}
	}
	return gameapi.Reply{}
}

func (g *fakeGame) Presence(id string, p gameapi.Presence) {
	g.mu.Lock()
	g.presence[id] = append(g.presence[id], p)
	g.mu.Unlock()
	c := g.chars[id]
	switch p {
	case gameapi.Away:
		c.pending = nil
	case gameapi.Fresh:
		c.lastIn, c.pending, c.held = 0, nil, false
	case gameapi.Held:
		c.held, c.pending = true, nil
	case gameapi.Freed:
		c.held = false
	}
}

func (g *fakeGame) Step(out gameapi.Out) {
	g.tick++
	g.mu.Lock()
	g.steps = append(g.steps, time.Now())
	g.mu.Unlock()
	if g.tick == g.stallAt {
		time.Sleep(g.stallFor)
	}
	for _, c := range g.chars {
		for _, in := range c.pending {
			if in.Seq > c.lastIn && !c.held {
				c.x += in.DX
				c.lastIn = in.Seq
			}
		}
		c.pending = nil
	}
	for _, id := range g.portals {
		out.Portal(id, mapgen.Portal{ID: 7, TargetMapID: "frontier"})
	}
	g.portals = nil
	for _, ev := range g.criticals {
		out.Critical(ev)
	}
	g.criticals = nil
}

func (g *fakeGame) State(id string) (record.CharacterState, bool) {
	c, ok := g.chars[id]
	if !ok {
		return record.CharacterState{}, false
	}
	return record.CharacterState{CharacterID: id, X: c.x, Y: 5, Attributes: c.attrs}, true
}

func (g *fakeGame) Leave(id string) { delete(g.chars, id) }

func (g *fakeGame) Welcome(id string) gameapi.Welcome {
	w := gameapi.Welcome{View: &fakeView{g: g, id: id}, FarView: &wire.FarView{Radius: 60, Every: 12}}
	if g.greet {
		w.After = [][]byte{[]byte(`{"v":1,"kind":"event","name":"greeting"}`)}
	}
	return w
}

func (g *fakeGame) Stats() gameapi.Stats { return gameapi.Stats{Entities: len(g.chars)} }

func (g *fakeGame) InstanceState() json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"tick":%d}`, g.tick))
}

// Presences returns what the kit told the game of a character so far.
func (g *fakeGame) Presences(id string) []gameapi.Presence {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]gameapi.Presence(nil), g.presence[id]...)
}

// Steps returns the times of every step so far.
func (g *fakeGame) Steps() []time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]time.Time(nil), g.steps...)
}

type fakeView struct {
	g     *fakeGame
	id    string
	acked uint64
	sent  map[uint64]bool
}

// fakeSnapshot is what fakeView writes.
type fakeSnapshot struct {
	Tick uint64  `json:"tick"`
	Full bool    `json:"full"`
	Base uint64  `json:"base"`
	X    float64 `json:"x"`
	Ack  uint64  `json:"ack"`
	Pad  string  `json:"pad,omitempty"`
}

func (v *fakeView) Snapshot(dst []byte) ([]byte, bool) {
	if v.sent == nil {
		v.sent = make(map[uint64]bool)
	}
	c := v.g.chars[v.id]
	s := fakeSnapshot{Tick: v.g.tick, Full: v.acked == 0, Base: v.acked, X: c.x, Ack: c.lastIn}
	if v.id == v.g.padFor {
		s.Pad = strings.Repeat("x", v.g.padBytes)
	}
	v.sent[v.g.tick] = true
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprint("fake snapshot: ", err))
	}
	return append(dst, b...), s.Full
}

func (v *fakeView) Ack(tick uint64) {
	if v.sent[tick] && tick > v.acked {
		v.acked = tick
	}
}
