package app

import (
	"encoding/json"

	"github.com/mapyard/mapyard/mapserver/loop"
	"github.com/mapyard/mapyard/mapserver/mapgen"
	"github.com/mapyard/mapyard/orchestrator"
)

// NewGame is the default GameFactory: characters stand where they arrive and commands
// are answered not_implemented, until the simulation package drives them.
func NewGame(w *mapgen.World, cfg mapgen.MapConfig, tickHz int) (loop.Game, error) {
	return &stillGame{world: w, mapID: cfg.MapID, chars: make(map[string]orchestrator.CharacterState)}, nil
}

// stillGame keeps characters where they arrive.
type stillGame struct {
	world *mapgen.World
	mapID string
	chars map[string]orchestrator.CharacterState
}

var _ loop.Game = (*stillGame)(nil)

func (g *stillGame) Decode(feature, action string, payload json.RawMessage) (any, error) {
	return nil, orchestrator.Errorf(orchestrator.ENOTIMPLEMENTED, "commands are not simulated yet")
}

func (g *stillGame) Spawn(id string, st *orchestrator.CharacterState) error {
	c := orchestrator.CharacterState{CharacterID: id, MapID: g.mapID}
	if st != nil {
		c.Attributes = st.Attributes
	}
	if st != nil && st.MapID == g.mapID {
		c.X, c.Y = st.X, st.Y
	} else if len(g.world.Spawns) > 0 {
		c.X, c.Y = float64(g.world.Spawns[0].X)/100, float64(g.world.Spawns[0].Y)/100
	}
	g.chars[id] = c
	return nil
}

func (g *stillGame) Apply(string, any) error { return nil }
func (g *stillGame) Stop(string)             {}
func (g *stillGame) Step() []loop.Event      { return nil }

func (g *stillGame) State(id string) (orchestrator.CharacterState, bool) {
	c, ok := g.chars[id]
	return c, ok
}

func (g *stillGame) Despawn(id string)        { delete(g.chars, id) }
func (g *stillGame) NewView(string) loop.View { return stillView{} }
func (g *stillGame) Entities() int            { return len(g.chars) }

type stillView struct{}

func (stillView) Snapshot(dst []byte) ([]byte, bool) { return nil, false }
func (stillView) Ack(uint64)                         {}
