package app

import (
	"fmt"

	"github.com/mapyard/mapyard/mapserver/gameapi"
)

// panicAt wraps the game newGame builds so that its Step panics at tick n
// (MAP_FAULT_PANIC_AT_TICK): a game's defect, for the tests that show such a map exits
// and is restarted like any crash. Nothing else of the game changes.
func panicAt(newGame gameapi.New, n int) gameapi.New {
	return func(s gameapi.Setup) (gameapi.Game, error) {
		g, err := newGame(s)
		if err != nil {
			return nil, err
		}
		return &faulty{Game: g, at: n}, nil
	}
}

// faulty is a game whose Step panics at tick at.
type faulty struct {
	gameapi.Game
	at, ticks int
}

func (f *faulty) Step(out gameapi.Out) {
	if f.ticks++; f.ticks == f.at {
		panic(fmt.Sprintf("fault injection: the game panics at tick %d (MAP_FAULT_PANIC_AT_TICK)", f.at))
	}
	f.Game.Step(out)
}
