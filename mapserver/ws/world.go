package ws

import (
	"context"
	"sync"

	"github.com/mapyard/mapyard/mapserver/mapgen"
)

// World holds the static world a map runs, once generated: the MapConfig and the content
// hash a welcome carries. A map server generates its world after the orchestrator names
// its instance, so a player may arrive a moment before; Wait lets the handshake wait for
// it briefly instead of failing.
type World struct {
	mu    sync.Mutex
	cfg   mapgen.MapConfig
	hash  string
	ready chan struct{}
}

// NewWorld returns a World with nothing generated yet.
func NewWorld() *World { return &World{ready: make(chan struct{})} }

// Set publishes the generated world. Only the first call counts: a map runs one world.
func (w *World) Set(cfg mapgen.MapConfig, hash string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.ready:
		return
	default:
	}
	w.cfg, w.hash = cfg, hash
	close(w.ready)
}

// Get returns the world and true once it is generated.
func (w *World) Get() (mapgen.MapConfig, string, bool) {
	select {
	case <-w.ready:
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.cfg, w.hash, true
	default:
		return mapgen.MapConfig{}, "", false
	}
}

// Wait returns the world once it is generated, or false when ctx ends first.
func (w *World) Wait(ctx context.Context) (mapgen.MapConfig, string, bool) {
	select {
	case <-w.ready:
		return w.Get()
	case <-ctx.Done():
		return mapgen.MapConfig{}, "", false
	}
}
