package main

import (
	"context"
	"strings"
	"time"

	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
)

// lazyMaps gives admission ready instances, starting a missing one (instance
// "<mapId>-1" of map mapId) and waiting a bounded time for it to register.
type lazyMaps struct{ s *docker.Supervisor }

// lazyWait bounds how long a join or transfer waits for a map to start.
const lazyWait = 20 * time.Second

func (m lazyMaps) Instance(id string) (orchestrator.Instance, error) { return m.s.Instance(id) }

func (m lazyMaps) Acquire(ctx context.Context, id string) (orchestrator.Instance, error) {
	inst, err := m.s.Instance(id)
	switch {
	case err == nil && inst.State == orchestrator.StateReady:
		return inst, nil
	case err == nil && inst.State == orchestrator.StateQuarantined:
		return inst, orchestrator.Errorf(orchestrator.EMAPQUARANTINED, "map instance %q is quarantined", id)
	case err != nil:
		if !orchestrator.IDPattern.MatchString(id) {
			return inst, orchestrator.Errorf(orchestrator.EBADREQUEST, "invalid instance id %q", id)
		}
		mapID := id
		if i := strings.LastIndexByte(id, '-'); i > 0 {
			mapID = id[:i]
		}
		if err := m.s.Ensure(ctx, id, mapID); err != nil {
			return inst, orchestrator.Errorf(orchestrator.EMAPUNAVAILABLE, "map instance %q could not start", id)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, lazyWait)
	defer cancel()
	for {
		if inst, err := m.s.Instance(id); err == nil && inst.State == orchestrator.StateReady {
			return inst, nil
		}
		select {
		case <-ctx.Done():
			return orchestrator.Instance{}, orchestrator.Errorf(orchestrator.EMAPUNAVAILABLE, "map instance %q is not ready", id)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
