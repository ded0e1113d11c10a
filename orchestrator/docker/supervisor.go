package docker

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/mapyard/mapyard/orchestrator"
)

// Supervisor keeps the map instances the orchestrator wants running as containers and
// tracks their state. It implements orchestrator.Maps.
type Supervisor struct {
	API API
	Log *slog.Logger
	Now func() time.Time

	// Spec is the template for new map containers; InstanceID, MapID and the
	// instance-specific environment are filled in per instance.
	Spec MapSpec

	// DefaultInstanceID is the instance whose readiness is the orchestrator's readiness.
	DefaultInstanceID string

	mu        sync.Mutex
	instances map[string]*orchestrator.Instance
}

var _ orchestrator.Maps = (*Supervisor)(nil)

// NewSupervisor returns a Supervisor over api that creates containers from spec.
func NewSupervisor(api API, spec MapSpec, defaultInstanceID string, log *slog.Logger) *Supervisor {
	return &Supervisor{
		API:               api,
		Log:               log,
		Now:               time.Now,
		Spec:              spec,
		DefaultInstanceID: defaultInstanceID,
		instances:         make(map[string]*orchestrator.Instance),
	}
}

// Ensure makes sure instanceID of mapID has a running container. A running container
// is kept as it is (the map re-registers with this orchestrator through its heartbeat);
// an exited one is removed and replaced.
func (s *Supervisor) Ensure(ctx context.Context, instanceID, mapID string) error {
	s.setState(instanceID, mapID, orchestrator.StateStarting, "wanted", "")

	c, ok, err := FindMap(ctx, s.API, instanceID)
	if err != nil {
		return err
	}
	if ok && c.State == "running" {
		s.setState(instanceID, mapID, orchestrator.StateStarting, "found running container", c.ID)
		s.Log.Info("map container already running", "instance", instanceID, "container", shortID(c.ID))
		return nil
	}
	if ok {
		s.Log.Info("removing stale map container", "instance", instanceID, "container", shortID(c.ID), "state", c.State)
		if err := RemoveMap(ctx, s.API, c.ID); err != nil {
			return err
		}
	}

	spec := s.Spec
	spec.InstanceID, spec.MapID = instanceID, mapID
	spec.Env = append(append([]string(nil), s.Spec.Env...), "MAP_INSTANCE_ID="+instanceID, "MAP_MAP_ID="+mapID)
	id, err := CreateMap(ctx, s.API, spec)
	if err != nil {
		s.setState(instanceID, mapID, orchestrator.StateStopped, err.Error(), "")
		return fmt.Errorf("start map %q: %w", instanceID, err)
	}
	// Record the container before starting it: the map may register before
	// ContainerStart returns, and its registration must find this container.
	s.setState(instanceID, mapID, orchestrator.StateStarting, "container created", id)
	if err := StartMap(ctx, s.API, id); err != nil {
		s.setState(instanceID, mapID, orchestrator.StateStopped, err.Error(), id)
		return fmt.Errorf("start map %q: %w", instanceID, err)
	}
	s.Log.Info("map container started", "instance", instanceID, "map", mapID, "container", shortID(id))
	return nil
}

// MapReady records a map server's registration: the instance becomes ready and its
// published ports are read back from Docker.
func (s *Supervisor) MapReady(ctx context.Context, r orchestrator.MapReady) error {
	if !orchestrator.IDPattern.MatchString(r.InstanceID) {
		return orchestrator.Errorf(orchestrator.EBADREQUEST, "instanceId %q is not a valid id", r.InstanceID)
	}
	s.mu.Lock()
	inst, ok := s.instances[r.InstanceID]
	var containerID string
	if ok {
		containerID = inst.ContainerID
	}
	s.mu.Unlock()
	if !ok {
		return orchestrator.Errorf(orchestrator.ENOTFOUND, "instance %q is not wanted by this orchestrator", r.InstanceID)
	}
	if containerID == "" {
		c, found, err := FindMap(ctx, s.API, r.InstanceID)
		if err != nil {
			return err
		} else if !found {
			return orchestrator.Errorf(orchestrator.ENOTFOUND, "instance %q has no container", r.InstanceID)
		}
		containerID = c.ID
	}
	game, ctrl, err := PublishedPorts(ctx, s.API, containerID)
	if err != nil {
		return fmt.Errorf("map-ready %q: %w", r.InstanceID, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if inst.State != orchestrator.StateReady {
		s.Log.Info("map ready", "instance", r.InstanceID, "from", inst.State, "gamePort", game, "controlPort", ctrl, "version", r.Version)
	}
	inst.ContainerID, inst.GamePort, inst.ControlPort = containerID, game, ctrl
	inst.State, inst.Reason, inst.Since = orchestrator.StateReady, "map registered", s.Now()
	return nil
}

// Registered reports whether instanceID is ready, i.e. its map server has registered
// with this orchestrator. Heartbeats use it to tell a map to register again.
func (s *Supervisor) Registered(instanceID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	inst, ok := s.instances[instanceID]
	return ok && inst.State == orchestrator.StateReady
}

// Instances lists every known instance, ordered by id.
func (s *Supervisor) Instances() []orchestrator.Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]orchestrator.Instance, 0, len(s.instances))
	for _, inst := range s.instances {
		out = append(out, *inst)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Instance returns one instance by id.
func (s *Supervisor) Instance(id string) (orchestrator.Instance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	inst, ok := s.instances[id]
	if !ok {
		return orchestrator.Instance{}, orchestrator.Errorf(orchestrator.ENOTFOUND, "no map instance %q", id)
	}
	return *inst, nil
}

// Ready reports whether the default instance is ready.
func (s *Supervisor) Ready() bool { return s.Registered(s.DefaultInstanceID) }

func (s *Supervisor) setState(id, mapID string, st orchestrator.InstanceState, reason, containerID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	inst, ok := s.instances[id]
	if !ok {
		inst = &orchestrator.Instance{ID: id, MapID: mapID}
		s.instances[id] = inst
	}
	if inst.State != st {
		s.Log.Debug("map state", "instance", id, "from", inst.State, "to", st, "reason", reason)
	}
	inst.State, inst.Reason, inst.Since = st, reason, s.Now()
	if containerID != "" {
		inst.ContainerID = containerID
	}
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
