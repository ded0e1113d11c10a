// Package tag is a game of tag written against mapyard's game API alone
// (docs/game-api.md walks through it). One player is "it"; when it touches another
// player, or tags one within reach, that player is it. A player just tagged, or just
// arrived, cannot be tagged for a moment (no tag-backs), and bases shelter whoever
// stands on them, for a while. Players walk with the kit's movement (mapserver/sim), so
// the browser predicts them as on any map; a character arrives with whatever it carries
// from other games and leaves with it unchanged, plus its score.
package tag

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"slices"

	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// The rules, in quanta (1/16 m) and ticks, so that they never read a clock.
const (
	TouchRadius = 1 * sim.QuantaPerUnit // closer than this is a touch
	TagReach    = 3 * sim.QuantaPerUnit // how far the tag command reaches
	ImmuneTicks = 90                    // 3 s at 30 Hz: no tag-backs, no tag on arrival
	BaseRadius  = 3 * sim.QuantaPerUnit
	BaseTicks   = 150 // 5 s: how long a base shelters a player who stepped on it
)

// Commands: {"feature":"tag","action":"tag","payload":{"id":N}} tags the player shown
// as entity N; {"feature":"tag","action":"scores","payload":{}} is answered with a
// "scores" event. Movement is the kit's ("movement"/"input_batch").
const (
	Feature      = "tag"
	ActionTag    = "tag"
	ActionScores = "scores"
)

// Refusals of the tag command.
const (
	CodeNotIt      = "not_it"       // only the player who is it tags
	CodeOutOfReach = "out_of_reach" // farther than TagReach
	CodeShielded   = "shielded"     // just tagged, just arrived, or on a base
	CodeNoPlayer   = "no_player"    // no other player here is that entity
)

// AttrTag is the attribute where a character's score travels: {"tags":N}, the players
// it tagged. Every other attribute passes through the game unchanged.
const AttrTag = "tag"

// Game is one arena of tag.
type Game struct {
	world   *mapgen.World
	mapID   string
	sim     *sim.State
	enc     *wire.Encoder
	bases   []sim.Vec
	players map[string]*player
	owners  map[int32]string // simulation slot → character
	it      string           // the character who is it ("": nobody is here)
	joins   uint64           // characters joined so far, for their order
	notes   []gameapi.Note   // raised outside Step, sent with the next
	encoded uint64           // the tick the encoder's table holds, once began
	began   bool
	all     []int32 // every wire slot of that table
}

// player is a character in the arena.
type player struct {
	id      string
	slot    int32
	order   uint64 // join order: the first still here is it when it leaves
	tags    int    // players it tagged, here and before
	attrs   json.RawMessage
	saved   int    // tags as the attributes say, to pass them on untouched
	immune  uint64 // the first tick it can be tagged again
	base    int    // 1 + the base it stands on, 0 none
	onSince uint64 // the tick it stepped on that base
}

var _ gameapi.Game = (*Game)(nil)

// MaxArena is the largest side of an arena, in metres: tag is a game of players who
// find each other, and New refuses a config for a larger one.
const MaxArena = 400

// New is the game API's constructor of a tag arena: the kit's movement over the world,
// no NPCs, and a base at each quarter of the map on open ground.
func New(s gameapi.Setup) (gameapi.Game, error) {
	if b := s.Config.Bounds; b.Width > MaxArena || b.Height > MaxArena {
		return nil, fmt.Errorf("a tag arena is at most %d m on a side, small enough for players to find each other; this config asks for %d x %d m", MaxArena, b.Width, b.Height)
	}
	st, err := sim.New(s.World, sim.Options{TickHz: s.TickHz, Seed: s.Config.Seed})
	if err != nil {
		return nil, fmt.Errorf("tag arena %q: %w", s.Config.MapID, err)
	}
	g := &Game{world: s.World, mapID: s.Config.MapID, sim: st, enc: wire.NewEncoder(wire.DefaultClientRing),
		players: make(map[string]*player), owners: make(map[int32]string)}
	g.enc.SetRates(s.TickHz, s.SnapshotHz)
	w, h := st.Colliders().Bounds()
	for _, q := range [][2]int32{{1, 1}, {3, 1}, {1, 3}, {3, 3}} {
		g.bases = append(g.bases, st.Colliders().NearestOpen(sim.Vec{X: w * q[0] / 4, Y: h * q[1] / 4}))
	}
	return g, nil
}

// Decode reads movement input batches, the tag command and the scores query.
func (g *Game) Decode(feature, action string, payload json.RawMessage) (any, error) {
	switch feature + "/" + action {
	case wire.FeatureMovement + "/" + wire.ActionInputBatch:
		in, err := wire.DecodeInputBatch(payload, nil)
		if err != nil {
			return nil, apierr.Errorf(wire.CodeBadPayload, "%v", err)
		}
		return in, nil
	case Feature + "/" + ActionTag:
		var c Tag
		if strict(payload, &c) != nil || c.ID == 0 {
			return nil, apierr.Errorf(wire.CodeBadPayload, `tag needs {"id":N}, the entity id of a player`)
		}
		return c, nil
	case Feature + "/" + ActionScores:
		return Scores{}, nil
	}
	return nil, apierr.Errorf(wire.CodeUnknownCommand, "unknown command %.32q/%.32q", feature, action)
}

// Tag is a decoded tag command: tag the player shown as entity ID.
type Tag struct {
	ID uint64 `json:"id"`
}

// Scores is a decoded scores query.
type Scores struct{}

// strict decodes one JSON object into v, refusing unknown fields.
func strict(payload []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Join places a character (back where it stood if it was saved here, beside the
// portal it came through, else at a spawn point), shielded for ImmuneTicks; the first
// character of an empty arena is it.
func (g *Game) Join(a gameapi.Arrival) (uint64, error) {
	if g.players[a.CharacterID] != nil {
		return 0, fmt.Errorf("character %q is already in the arena", a.CharacterID)
	}
	slot, id := g.sim.AddPlayer(sim.PlayerState{Pos: g.arrival(a.CharacterID, a.State)})
	p := &player{id: a.CharacterID, slot: slot, order: g.joins, immune: g.sim.Tick() + ImmuneTicks}
	g.joins++
	if a.State != nil {
		p.attrs = a.State.Attributes
		var at struct {
			Tag struct{ Tags int } `json:"tag"`
		}
		_ = json.Unmarshal(p.attrs, &at) // attributes without a score start at 0
		p.tags, p.saved = at.Tag.Tags, at.Tag.Tags
	}
	g.players[p.id], g.owners[slot] = p, p.id
	if g.it == "" {
		g.pass(p.id, nil)
	}
	return uint64(id), nil
}

// arrival is where a character appears, in quanta.
func (g *Game) arrival(characterID string, st *record.CharacterState) sim.Vec {
	at := func(x, y float64) sim.Vec {
		return sim.Vec{X: int32(math.Round(x * sim.QuantaPerUnit)), Y: int32(math.Round(y * sim.QuantaPerUnit))}
	}
	if st != nil && st.MapID == g.mapID {
		return at(st.X, st.Y)
	}
	for _, pt := range g.world.Portals {
		if st != nil && pt.TargetMapID == st.MapID { // a step off the portal, towards the centre
			cx, cy := float64(g.world.Width)/2, float64(g.world.Height)/2
			dx, dy := cx-float64(pt.X), cy-float64(pt.Y)
			d := max(math.Hypot(dx, dy), 1)
			r := float64(pt.Radius) + 150
			return at((float64(pt.X)+dx/d*r)/100, (float64(pt.Y)+dy/d*r)/100)
		}
	}
	if len(g.world.Spawns) == 0 {
		return at(float64(g.world.Width)/200, float64(g.world.Height)/200)
	}
	h := fnv.New32a()
	h.Write([]byte(characterID))
	s := g.world.Spawns[h.Sum32()%uint32(len(g.world.Spawns))]
	return at(float64(s.X)/100, float64(s.Y)/100)
}

// Leave takes a character out; when it was it, the first player who joined of those
// left is it.
func (g *Game) Leave(characterID string) {
	p := g.players[characterID]
	if p == nil {
		return
	}
	g.sim.RemovePlayer(p.slot)
	delete(g.players, characterID)
	delete(g.owners, p.slot)
	if g.it != characterID {
		return
	}
	g.it = ""
	var next *player
	for _, q := range g.players {
		if next == nil || q.order < next.order {
			next = q
		}
	}
	if next != nil {
		g.pass(next.id, nil)
	}
}

// Presence stops a character whose connection is gone, restarts the input sequence of
// one taken over, and freezes one whose transfer is in flight.
func (g *Game) Presence(characterID string, pr gameapi.Presence) {
	p := g.players[characterID]
	if p == nil {
		return
	}
	switch pr {
	case gameapi.Away:
		g.sim.Halt(p.slot)
	case gameapi.Fresh:
		g.sim.Freeze(p.slot, false)
		g.sim.NewSession(p.slot)
	case gameapi.Held, gameapi.Freed:
		g.sim.Freeze(p.slot, pr == gameapi.Held)
	}
}

// Command queues movement, tags, or answers the scores query with a "scores" event.
func (g *Game) Command(characterID string, seq uint64, cmd any, out gameapi.Out) gameapi.Reply {
	p := g.players[characterID]
	if p == nil {
		return gameapi.Reply{Err: apierr.Errorf(apierr.ENOTFOUND, "you are not in the arena")}
	}
	switch c := cmd.(type) {
	case []sim.Input:
		g.sim.Enqueue(p.slot, c)
		return gameapi.Reply{Quiet: true}
	case Tag:
		return gameapi.Reply{Err: g.tag(p, c.ID)}
	case Scores:
		out.Notify(g.scores(seq), []string{characterID})
		return gameapi.Reply{Quiet: true}
	}
	return gameapi.Reply{Err: apierr.Errorf(wire.CodeUnknownCommand, "unknown command")}
}

// tag passes it from p to the player shown as entity, if the rules let it.
func (g *Game) tag(p *player, entity uint64) error {
	if g.it != p.id {
		return apierr.Errorf(CodeNotIt, "Only the player who is it can tag.")
	}
	var q *player
	for _, o := range g.players {
		if o != p && uint64(g.sim.Entities[o.slot].ID) == entity {
			q = o
		}
	}
	switch {
	case q == nil:
		return apierr.Errorf(CodeNoPlayer, "There is no such player here.")
	case !near(g.pos(p), g.pos(q), TagReach):
		return apierr.Errorf(CodeOutOfReach, "That player is out of reach.")
	case g.shielded(q):
		return apierr.Errorf(CodeShielded, "That player cannot be tagged just now.")
	}
	g.pass(q.id, p)
	return nil
}

// Settle is never called: tag makes nothing durable beyond the character's state.
func (g *Game) Settle(string, error, gameapi.Out) error { return nil }

// Step walks everyone, sends those who entered a portal on their way, keeps count of
// who stands on a base, and passes it to the nearest player the one who is it touches.
func (g *Game) Step(out gameapi.Out) {
	ev := g.sim.Step()
	for _, e := range ev.Portals {
		if id, ok := g.owners[e.Slot]; ok && e.Portal < len(g.world.Portals) {
			out.Portal(id, g.world.Portals[e.Portal])
		}
	}
	for _, p := range g.players {
		base := 0
		for i, b := range g.bases {
			if near(g.pos(p), b, BaseRadius) {
				base = i + 1
			}
		}
		if base != p.base {
			p.base, p.onSince = base, g.sim.Tick()
		}
	}
	if it := g.players[g.it]; it != nil {
		var touched *player // the nearest, the first to have joined of those as near
		for _, q := range g.players {
			if q == it || !near(g.pos(it), g.pos(q), TouchRadius) || g.shielded(q) {
				continue
			}
			if touched == nil || cmp.Or(cmp.Compare(dist2(g.pos(it), g.pos(q)), dist2(g.pos(it), g.pos(touched))),
				cmp.Compare(q.order, touched.order)) < 0 {
				touched = q
			}
		}
		if touched != nil {
			g.pass(touched.id, it)
		}
	}
	for _, n := range g.notes {
		out.Notify(n.Frame, n.CharacterIDs)
	}
	g.notes = g.notes[:0]
}

// pass makes to it: the one who tagged it (by, nil for none) scores and cannot be
// tagged back for ImmuneTicks. Everyone hears a "tagged" event at the next Step.
func (g *Game) pass(to string, by *player) {
	g.it = to
	d := Tagged{It: uint64(g.sim.Entities[g.players[to].slot].ID)}
	if by != nil {
		by.tags++
		by.immune = g.sim.Tick() + ImmuneTicks
		d.By = uint64(g.sim.Entities[by.slot].ID)
	}
	frame, _ := json.Marshal(wire.Event{V: wire.Version, Kind: wire.KindEvent, Name: EventTagged, Data: d,
		Message: "A new player is it!"})
	g.notes = append(g.notes, gameapi.Note{Frame: frame, CharacterIDs: g.ids()})
}

// EventTagged names the event every player gets when someone is it.
const EventTagged = "tagged"

// Tagged is the Data of a "tagged" event: the entity now it, and the one who tagged it
// (0 when nobody did: the first player, or the one who was it left).
type Tagged struct {
	It uint64 `json:"it"`
	By uint64 `json:"by,omitempty"`
}

// Score is one line of a "scores" event: a player's entity and the players it tagged.
type Score struct {
	ID   uint64 `json:"id"`
	Tags int    `json:"tags"`
}

// scores is the "scores" event answering query seq: the players here, most tags first.
func (g *Game) scores(seq uint64) []byte {
	lines := make([]Score, 0, len(g.players))
	for _, p := range g.players {
		lines = append(lines, Score{ID: uint64(g.sim.Entities[p.slot].ID), Tags: p.tags})
	}
	slices.SortFunc(lines, func(a, b Score) int { return cmp.Or(cmp.Compare(b.Tags, a.Tags), cmp.Compare(a.ID, b.ID)) })
	frame, _ := json.Marshal(wire.Event{V: wire.Version, Kind: wire.KindEvent, Name: ActionScores,
		Data: map[string]any{"seq": seq, "scores": lines}})
	return frame
}

// State is where a character stands and its attributes, its score under AttrTag:
// passed on as they came while the score did not change.
func (g *Game) State(characterID string) (record.CharacterState, bool) {
	p := g.players[characterID]
	if p == nil {
		return record.CharacterState{}, false
	}
	pos := g.pos(p)
	st := record.CharacterState{CharacterID: p.id, MapID: g.mapID, Attributes: p.attrs,
		X: float64(pos.X) / sim.QuantaPerUnit, Y: float64(pos.Y) / sim.QuantaPerUnit}
	if p.tags != p.saved {
		obj := map[string]json.RawMessage{}
		_ = json.Unmarshal(p.attrs, &obj) // attributes that are no object are replaced
		obj[AttrTag] = json.RawMessage(fmt.Sprintf(`{"tags":%d}`, p.tags))
		st.Attributes, _ = json.Marshal(obj)
	}
	return st, true
}

// InstanceState is who is it, by entity.
func (g *Game) InstanceState() json.RawMessage {
	it := uint64(0)
	if p := g.players[g.it]; p != nil {
		it = uint64(g.sim.Entities[p.slot].ID)
	}
	return json.RawMessage(fmt.Sprintf(`{"mapId":%q,"tick":%d,"it":%d}`, g.mapID, g.sim.Tick(), it))
}

// Stats counts players and bases.
func (g *Game) Stats() gameapi.Stats {
	return gameapi.Stats{Entities: len(g.players) + len(g.bases), InputsDropped: g.sim.Counters().InputsDropped}
}

// shielded reports whether q cannot be tagged now: just tagged or arrived, or on a
// base it stepped on less than BaseTicks ago.
func (g *Game) shielded(q *player) bool {
	t := g.sim.Tick()
	return t < q.immune || (q.base != 0 && t < q.onSince+BaseTicks)
}

func (g *Game) pos(p *player) sim.Vec { return g.sim.Entities[p.slot].Pos }

// ids are the characters here.
func (g *Game) ids() []string {
	out := make([]string, 0, len(g.players))
	for id := range g.players {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func dist2(a, b sim.Vec) int64 {
	dx, dy := int64(a.X-b.X), int64(a.Y-b.Y)
	return dx*dx + dy*dy
}

func near(a, b sim.Vec, r int64) bool { return dist2(a, b) <= r*r }
