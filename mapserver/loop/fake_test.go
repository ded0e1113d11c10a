package loop_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/loop"
)

// fakeGame is a tiny game: characters stand on a line at X and move by the dx of their
// inputs; "test"/"portal" makes the character enter a portal at the next step and
// "test"/"reject" is refused by Apply. Its views write JSON snapshots saying whether
// they are full or a delta against the acknowledged tick.
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

func newFakeGame() *fakeGame { return &fakeGame{chars: make(map[string]*fakeChar)} }

var _ loop.Game = (*fakeGame)(nil)

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

func (g *fakeGame) Spawn(id string, st *record.CharacterState) error {
	g.spawned++
	c := &fakeChar{x: 100, entity: 100 + g.spawned}
	if st != nil {
		c.x, c.attrs = st.X, st.Attributes
	}
	g.chars[id] = c
	return nil
}

func (g *fakeGame) Apply(id string, cmd any) error {
	c := g.chars[id]
	switch v := cmd.(type) {
	case []fakeInput:
		c.pending = append(c.pending, v...)
	case portalCmd:
		g.portals = append(g.portals, id)
	case string:
		if v == "reject" {
			return apierr.Errorf(apierr.ECONFLICT, "refused")
		}
	}
	return nil
}

func (g *fakeGame) Stop(id string) { g.chars[id].pending = nil }

func (g *fakeGame) NewSession(id string) { g.chars[id].lastIn, g.chars[id].pending = 0, nil }

func (g *fakeGame) Hold(id string, on bool) {
	g.chars[id].held = on
	if on {
		g.chars[id].pending = nil
	}
}

func (g *fakeGame) InputsDropped() uint64 { return 0 }

func (g *fakeGame) Step() []loop.Event {
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
	var evs []loop.Event
	for _, id := range g.portals {
		evs = append(evs, loop.Event{CharacterID: id, Portal: mapgen.Portal{ID: 7, TargetMapID: "frontier"}})
	}
	g.portals = nil
	return evs
}

func (g *fakeGame) State(id string) (record.CharacterState, bool) {
	c, ok := g.chars[id]
	if !ok {
		return record.CharacterState{}, false
	}
	return record.CharacterState{CharacterID: id, X: c.x, Y: 5, Attributes: c.attrs}, true
}

func (g *fakeGame) Despawn(id string) { delete(g.chars, id) }

func (g *fakeGame) NewView(id string) loop.View { return &fakeView{g: g, id: id} }

func (g *fakeGame) Entities() int { return len(g.chars) }

func (g *fakeGame) InstanceState() json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"tick":%d}`, g.tick))
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
