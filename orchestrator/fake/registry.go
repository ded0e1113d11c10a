// Package fake is the orchestrator side of the control RPC without Docker: map servers
// started by hand (a map developer's `docker run ... mapyard/map`, or a test) register
// with it, get their MapConfig, and redeem the dev join tickets it mints. Everything
// else (admission, tickets, the store) is the real code, so a map that works against the
// fake works against the orchestrator.
package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/keys"
)

// Registry tracks the map servers that registered. It implements orchestrator.Maps; what
// needs Docker (create, restart, stop) answers not_implemented.
type Registry struct {
	// MapHost is where registered maps' ports are reached (they run on this host).
	MapHost string
	// DefaultInstanceID is the instance whose registration makes /readyz answer 200.
	DefaultInstanceID string
	RPC               *mapcontract.MapClient
	// Root mints the credentials of maps started by hand: each of generation
	// DevGeneration (see DevCredentials).
	Root *keys.Root
	Log  *slog.Logger
	Now  func() time.Time
	// Configs holds MapConfigs (JSON) by instance id, sent in start-instance to the map
	// that registers as that instance; an instance without one is sent its map's
	// template (mapgen.StartConfig).
	Configs map[string]json.RawMessage

	mu        sync.Mutex
	instances map[string]*orchestrator.Instance
}

var _ orchestrator.Maps = (*Registry)(nil)

// DevGeneration is the generation of every map container started by hand against the
// fake orchestrator: there is one container per instance id, and no restarts to tell
// apart.
const DevGeneration = "dev"

// DevCredentials returns the environment a map started by hand as instanceID needs
// (MAP_CREDENTIAL and MAP_ORCH_CREDENTIAL), minted by root.
func DevCredentials(root *keys.Root, instanceID string) ([]string, error) {
	id := keys.Identity{InstanceID: instanceID, Generation: DevGeneration}
	mc, err := root.MapCredential(id)
	if err != nil {
		return nil, err
	}
	oc, err := root.OrchCredential(id)
	if err != nil {
		return nil, err
	}
	return []string{mapcontract.EnvCredential + "=" + mc, mapcontract.EnvOrchCredential + "=" + oc}, nil
}

// NewRegistry returns a Registry that reaches maps on 127.0.0.1 with credentials
// minted by root.
func NewRegistry(root *keys.Root, defaultInstanceID string, log *slog.Logger) *Registry {
	return &Registry{
		MapHost: "127.0.0.1", DefaultInstanceID: defaultInstanceID, Root: root,
		RPC: mapcontract.NewMapClient(2 * time.Second), Log: log, Now: time.Now,
		instances: make(map[string]*orchestrator.Instance),
	}
}

// MapReady registers a map server and, as the orchestrator does, answers with
// /control/start-instance carrying its whole MapConfig (the one in Configs, else its
// map's template): a map registering for a map without a template and without a config
// is refused with bad_request, since no config could be sent.
func (r *Registry) MapReady(ctx context.Context, m orchestrator.MapRegistration) error {
	if !record.ValidName(m.InstanceID) || !record.ValidName(m.MapID) {
		return apierr.Errorf(apierr.EBADREQUEST, "instanceId and mapId must be %s", record.IDRule)
	}
	if m.GamePort <= 0 || m.ControlPort <= 0 || m.GamePort > 65535 || m.ControlPort > 65535 {
		return apierr.Errorf(apierr.EBADREQUEST, "gamePort and controlPort must be ports")
	}
	url := fmt.Sprintf("http://%s:%d", r.MapHost, m.ControlPort)
	cred, err := r.Root.OrchCredential(keys.Identity{InstanceID: m.InstanceID, Generation: DevGeneration})
	if err != nil {
		return err
	}
	config, err := mapgen.StartConfig(m.InstanceID, m.MapID, r.Configs[m.InstanceID])
	if err != nil {
		return apierr.Errorf(apierr.EBADREQUEST, "map-ready %q: no MapConfig for it (ORCH_FAKE_MAP_CONFIG) and %v", m.InstanceID, err)
	}
	if err := r.RPC.StartInstance(ctx, url, cred, mapcontract.StartInstance{InstanceID: m.InstanceID, MapID: m.MapID, Config: config}); err != nil {
		return fmt.Errorf("map-ready %q: start-instance: %w", m.InstanceID, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.instances[m.InstanceID] = &orchestrator.Instance{
		ID: m.InstanceID, MapID: m.MapID, State: orchestrator.StateReady, Reason: "map registered",
		GamePort: m.GamePort, ControlPort: m.ControlPort, Since: r.Now(),
	}
	r.Log.Info("map registered", "instance", m.InstanceID, "map", m.MapID, "gamePort", m.GamePort, "controlPort", m.ControlPort)
	return nil
}

// Heartbeat reports whether the map is registered.
func (r *Registry) Heartbeat(instanceID, _ string, _ int) bool { return r.Registered(instanceID) }

// Registered reports whether the instance registered.
func (r *Registry) Registered(instanceID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.instances[instanceID]
	return ok
}

// Ready reports whether the default instance registered.
func (r *Registry) Ready() bool { return r.Registered(r.DefaultInstanceID) }

// Instances lists the registered instances, ordered by id.
func (r *Registry) Instances() []orchestrator.Instance {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]orchestrator.Instance, 0, len(r.instances))
	for _, in := range r.instances {
		out = append(out, *in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Instance returns a registered instance, or ENOTFOUND.
func (r *Registry) Instance(id string) (orchestrator.Instance, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if in, ok := r.instances[id]; ok {
		return *in, nil
	}
	return orchestrator.Instance{}, apierr.Errorf(apierr.ENOTFOUND, "no map instance %q has registered", id)
}

// Gate returns a registered instance: every registered map is ready. One that has not
// registered is map_unavailable.
func (r *Registry) Gate(id string) (orchestrator.Instance, error) {
	in, err := r.Instance(id)
	if err != nil {
		return in, apierr.Errorf(apierr.EMAPUNAVAILABLE, "map instance %q has not registered with the fake orchestrator", id)
	}
	return in, nil
}

// Acquire returns a registered instance. The fake cannot start maps, so an instance
// that has not registered is map_unavailable.
func (r *Registry) Acquire(ctx context.Context, id string) (orchestrator.Instance, error) {
	return r.Gate(id)
}

// Create is not available without Docker.
func (r *Registry) Create(ctx context.Context, c orchestrator.CreateInstance) (orchestrator.Instance, error) {
	return orchestrator.Instance{}, errNoDocker
}

// Settle is not available without Docker: nothing was created.
func (r *Registry) Settle(ctx context.Context, id string) (orchestrator.Instance, error) {
	return orchestrator.Instance{}, errNoDocker
}

// Upgrade is not available without Docker.
func (r *Registry) Upgrade(ctx context.Context, id, image string) (orchestrator.Instance, error) {
	return orchestrator.Instance{}, errNoDocker
}

// UpgradeAll is not available without Docker.
func (r *Registry) UpgradeAll(ctx context.Context, from, to string, parallel int) ([]string, error) {
	return nil, errNoDocker
}

// HandingOff is false: the fake orchestrator upgrades nothing.
func (r *Registry) HandingOff(id string) bool { return false }

// Restart is not available without Docker.
func (r *Registry) Restart(ctx context.Context, id string) error { return errNoDocker }

// Stop is not available without Docker.
func (r *Registry) Stop(ctx context.Context, id string) error { return errNoDocker }

var errNoDocker = &apierr.Error{Code: apierr.ENOTIMPLEMENTED, Message: "the fake orchestrator does not run containers: start map servers yourself"}
