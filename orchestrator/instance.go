package orchestrator

import (
	"context"
	"time"
)

// InstanceState is where a map instance is in its life. Transitions are made by the
// supervisor only, each with a reason that is logged and kept on the Instance.
type InstanceState string

// Instance states. A map is "ready" once its container runs and the map server has
// registered through the control RPC; joins and transfers go to ready maps only.
const (
	StateStarting    InstanceState = "starting"
	StateReady       InstanceState = "ready"
	StateUnhealthy   InstanceState = "unhealthy"
	StateRestarting  InstanceState = "restarting"
	StateQuarantined InstanceState = "quarantined"
	StateStopping    InstanceState = "stopping"
	StateStopped     InstanceState = "stopped"
)

// Instance is one running (or wanted) map: the unit the orchestrator supervises and
// the target of joins and transfers.
type Instance struct {
	ID           string        `json:"instanceId"`
	MapID        string        `json:"mapId"`
	State        InstanceState `json:"state"`
	Reason       string        `json:"reason,omitempty"`
	ContainerID  string        `json:"containerId,omitempty"`
	GamePort     int           `json:"gamePort,omitempty"`    // host port on 127.0.0.1
	ControlPort  int           `json:"controlPort,omitempty"` // host port on 127.0.0.1
	Restarts     int           `json:"restarts"`
	LastExitCode *int          `json:"lastExitCode,omitempty"`
	OOMKilled    bool          `json:"oomKilled"`
	Since        time.Time     `json:"since"`
}

// ContainerName is the Docker container name of a map instance, the name ops type in
// `docker logs`.
func ContainerName(instanceID string) string { return "mapyard-map-" + instanceID }

// Container labels. The orchestrator owns containers by label, never by name alone, so
// it can find (and adopt or remove) its containers after a restart.
const (
	LabelManaged  = "io.mapyard.managed"
	LabelInstance = "io.mapyard.instance"
	LabelMap      = "io.mapyard.map"
)

// MapReady is what a map server reports when it has started and can take players.
type MapReady struct {
	InstanceID  string `json:"instanceId"`
	MapID       string `json:"mapId"`
	GamePort    int    `json:"gamePort"`    // port inside the container
	ControlPort int    `json:"controlPort"` // port inside the container
	Version     string `json:"version"`
}

// Maps is what the control and public APIs need from the supervisor.
type Maps interface {
	// Instances lists every known instance, ordered by id.
	Instances() []Instance

	// Instance returns one instance. Error code: ENOTFOUND.
	Instance(id string) (Instance, error)

	// MapReady records that a map server registered. Error codes: EBADREQUEST,
	// ENOTFOUND (no such instance is wanted).
	MapReady(ctx context.Context, r MapReady) error

	// Registered reports whether the instance's map server has registered with this
	// orchestrator; a heartbeat from an unregistered map makes it register again.
	Registered(instanceID string) bool

	// Ready reports whether the default map is ready, which is what /readyz means.
	Ready() bool
}
