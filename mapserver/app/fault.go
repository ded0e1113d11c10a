package app

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

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

// allocateOnSignal waits for SIGUSR1 (MAP_FAULT_ALLOCATE_ON_SIGUSR1), then allocates
// 16 MiB blocks and writes every page of each, keeping them all, until the kernel ends
// the process: a map that runs out of memory, which the orchestrator sees as an
// out-of-memory kill (oomKilled) and restarts like any crash.
func allocateOnSignal(log *slog.Logger) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	go func() {
		<-sig
		log.Error("fault injection: allocating memory until killed (SIGUSR1)")
		var held [][]byte
		for {
			b := make([]byte, 16<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			held = append(held, b)
		}
	}()
}
