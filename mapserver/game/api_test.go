package game_test

import (
	"github.com/mapyard/mapyard/mapserver/game"
	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// The tests drive the game through the game API, as the kit does; these helpers name
// the calls they make most.

// join puts a character in g (gameapi.Game.Join) with the items it holds.
func join(g *game.Game, id string, st *record.CharacterState, held ...items.Item) error {
	_, err := g.Join(gameapi.Arrival{CharacterID: id, State: st, Items: held})
	return err
}

// try runs a character's command (gameapi.Game.Command) and returns the reply and what
// the game handed the kit with it.
func try(g *game.Game, c string, cmd any) (gameapi.Reply, *gameapi.Recorder) {
	out := &gameapi.Recorder{}
	return g.Command(c, 1, cmd, out), out
}

// refused returns the refusal of a command (nil: none).
func refused(g *game.Game, c string, cmd any) error {
	r, _ := try(g, c, cmd)
	return r.Err
}

// tryBegin runs a command that needs a critical event, giving the event eventID, and
// returns the event or the refusal.
func tryBegin(g *game.Game, c, eventID string, cmd any) (*record.CriticalEvent, error) {
	g.NewEventID = func() string { return eventID }
	r, _ := try(g, c, cmd)
	return r.Critical, r.Err
}

// settle hands the game an answer to event eventID (gameapi.Game.Settle): the first
// note is what the outcome shows (zero when none), the error the command's answer.
func settle(g *game.Game, eventID string, answer error) (gameapi.Note, error) {
	out := &gameapi.Recorder{}
	err := g.Settle(eventID, answer, out)
	var n gameapi.Note
	if len(out.Notes) > 0 {
		n = out.Notes[0]
	}
	return n, err
}

// step runs one tick and returns the frames it sent.
func step(g *game.Game) []gameapi.Note { return stepOut(g).Notes }

// stepOut runs one tick and returns all it handed the kit.
func stepOut(g *game.Game) *gameapi.Recorder {
	out := &gameapi.Recorder{}
	g.Step(out)
	return out
}

// view starts a connection's view of a character.
func view(g *game.Game, id string) gameapi.View { return g.Welcome(id).View }
