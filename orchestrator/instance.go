package orchestrator

import (
	"context"
	"encoding/json"
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
	// StateImageMissing: the instance cannot start because its image is not there to
	// run: the engine does not have it, or the host no longer allows it
	// (ORCH_MAP_IMAGES); the reason says which. Nothing is retried on its own — a
	// missing image does not appear by waiting, and a restart loop would only fill the
	// log — so the instance stays here until an operator restarts it (or the
	// orchestrator starts again), and joins and transfers to it fail at once.
	StateImageMissing InstanceState = "image_missing"
	// StateConfigRefused: the map's game refused the instance's MapConfig (its
	// start-instance answered map_config_refused); the reason carries the game's
	// message. Like image_missing it is not retried: the same image refuses the same
	// config again. An admin create that ends here is undone and answered 400; an
	// instance found here later (its template changed, or its image) stays until an
	// operator restarts it.
	StateConfigRefused InstanceState = "config_refused"
	// StateUnschedulable: no node of the cluster satisfies the map's placement (a
	// constraint no node meets, under ORCH_RUNTIME=swarm); the reason says which. Not
	// retried on its own: placement does not change by waiting, and a retry loop would
	// only fill the log. An operator's restart tries again, once the nodes or the
	// constraints changed; joins and transfers fail at once meanwhile.
	StateUnschedulable InstanceState = "unschedulable"
)

// Instance is one running (or wanted) map: the unit the orchestrator supervises and
// the target of joins and transfers.
type Instance struct {
	ID    string `json:"instanceId"`
	MapID string `json:"mapId"`
	// Image is the container image the instance runs in: the one its template or its
	// admin create named, else the host's ORCH_MAP_IMAGE.
	Image string        `json:"image"`
	State InstanceState `json:"state"`
	// Registered is whether the map server registered with this orchestrator process;
	// an adopted map is ready once probed and registers again on its next heartbeat.
	Registered   bool      `json:"registered"`
	Reason       string    `json:"reason,omitempty"`
	ContainerID  string    `json:"containerId,omitempty"`
	GamePort     int       `json:"gamePort,omitempty"`    // host port on 127.0.0.1
	GameAddr     string    `json:"gameAddr,omitempty"`    // host:port on the map network
	ControlPort  int       `json:"controlPort,omitempty"` // host port on 127.0.0.1
	Restarts     int       `json:"restarts"`
	LastExitCode *int      `json:"lastExitCode,omitempty"`
	OOMKilled    bool      `json:"oomKilled"`
	Since        time.Time `json:"since"`
	// Generation names the container the instance runs now (its credentials'
	// generation); it changes with every new container, a live upgrade's included.
	Generation string `json:"generation,omitempty"`
	// Upgrade is the instance's last live upgrade, while it runs and after it ended.
	Upgrade *UpgradeStatus `json:"upgrade,omitempty"`
}

// Upgrade phases, in order; an upgrade ends done or failed.
const (
	// UpgradeStarting: the next container runs beside the current one, registering and
	// building its world.
	UpgradeStarting = "starting"
	// UpgradeHandingOff: the next container is the instance's and takes new players;
	// the previous one hands its players over.
	UpgradeHandingOff = "handing_off"
	UpgradeDone       = "done"
	// UpgradeFailed: the next container did not become ready (or could not start); it
	// is removed, and the players never left the current one.
	UpgradeFailed = "failed"
)

// UpgradeStatus is a live upgrade's progress, in /admin/maps/{id}.
type UpgradeStatus struct {
	From  string `json:"from"`
	Image string `json:"image"`
	Phase string `json:"phase"`
	// Error says why a failed upgrade failed, or why a handoff fell back to a restart.
	Error string `json:"error,omitempty"`
	// Moved, Transferred and Remaining are the handoff's answer: players moved without
	// a reconnect, players sent a transfer message (their connection could not move),
	// and players left on the previous container when it stopped (they rejoin; after a
	// Fallback, as many as it held at its last heartbeat).
	Moved       int `json:"moved"`
	Transferred int `json:"transferred"`
	Remaining   int `json:"remaining"`
	// Fallback: the previous container does not serve /control/handoff, so it was
	// stopped and its players rejoined the next one (the restart path).
	Fallback  bool       `json:"fallback,omitempty"`
	StartedAt time.Time  `json:"startedAt"`
	EndedAt   *time.Time `json:"endedAt,omitempty"`
}

// Wanted-set statuses kept in the database: a "running" instance is started (or
// adopted) when the orchestrator starts; a "stopped" one only when a join needs it.
const (
	StatusRunning = "running"
	StatusStopped = "stopped"
)

// WantedInstance is one map instance the orchestrator wants to exist: the default
// instance and every instance created through the admin API. It is what survives an
// orchestrator restart and decides which labelled containers are adopted.
type WantedInstance struct {
	ID     string          `json:"instanceId"`
	MapID  string          `json:"mapId"`
	Config json.RawMessage `json:"config,omitempty"`
	// Image is the image its template or its admin create named; empty means the
	// host's ORCH_MAP_IMAGE at each start, so maps that name none follow the host's
	// default image across upgrades.
	Image string `json:"image,omitempty"`
	// Env are the MAP_FAULT_* variables of a test's admin create
	// (ORCH_ALLOW_FAULT_INJECTION=1), kept so that every container of the instance,
	// after an orchestrator restart too, runs with them; empty otherwise.
	Env    []string `json:"env,omitempty"`
	Status string   `json:"status"`
	// Restarts is how many times the supervisor restarted the instance after a crash
	// or failed health, kept so that an orchestrator restart does not forget it (the
	// store sets it apart from the rest: see supervise.Store.SetInstanceRestarts).
	Restarts  int       `json:"restarts"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// CreateInstance is an admin request for a new map instance.
type CreateInstance struct {
	InstanceID string `json:"instanceId"`
	MapID      string `json:"mapId"`
	// Config is the generated MapConfig, passed opaquely to the map server.
	Config json.RawMessage `json:"config,omitempty"`
	// Image is the container image to run the instance in; empty means the host's
	// ORCH_MAP_IMAGE. It must be one the host allows (ORCH_MAP_IMAGES), else the
	// create is refused with apierr.EIMAGENOTALLOWED and nothing is started.
	Image string `json:"image,omitempty"`
	// Env is extra container environment, accepted only when fault injection is allowed
	// (ORCH_ALLOW_FAULT_INJECTION=1) and only for MAP_FAULT_* variables: a test switch.
	Env []string `json:"env,omitempty"`
	// Cold starts the instance in a container created for it, labelled with it from
	// the start, instead of handing it a warm-pool container: the admin API sets it,
	// since no player waits on an operator's create. Not part of the request body.
	Cold bool `json:"-"`
}

// MapRegistration is a map server's report that it started and can take players: the
// instance it serves (or, for a blank warm-pool container, its pool id), its map, the
// ports its game and control listeners bind inside the container, and its build. The
// control API reads it from the map's POST /orch/map-ready.
type MapRegistration struct {
	InstanceID string
	// Generation is the registering container's, from its credential (not its body):
	// during a live upgrade two containers of one instance register.
	Generation  string
	MapID       string
	GamePort    int
	ControlPort int
	Version     string
}

// Maps is what the control and public APIs need from the supervisor.
type Maps interface {
	// Instances lists every known instance, ordered by id.
	Instances() []Instance

	// Instance returns one instance. Error code: apierr.ENOTFOUND.
	Instance(id string) (Instance, error)

	// MapReady records that a map server registered. Error codes: apierr.EBADREQUEST,
	// apierr.ENOTFOUND (no such instance is wanted).
	MapReady(ctx context.Context, r MapRegistration) error

	// Registered reports whether the instance's map server has registered with this
	// orchestrator; a heartbeat from an unregistered map makes it register again.
	Registered(instanceID string) bool

	// Ready reports whether the default map is ready, which is what /readyz means.
	Ready() bool

	// Heartbeat records the heartbeat of a map container (its instance and generation)
	// with its player count and reports whether the map is registered; an unregistered
	// map registers again.
	Heartbeat(instanceID, generation string, players int) (registered bool)

	// Gate reports whether the instance can take players now and returns it when it
	// can: the one readiness rule the edge, admission and Acquire all ask. Error codes:
	// EMAPQUARANTINED, EMAPUNAVAILABLE (unknown, or in any state but ready).
	Gate(instanceID string) (Instance, error)

	// Acquire returns the instance once it is ready, starting it if it is not running and
	// waiting a bounded time. Joins and transfers call it. Error codes: apierr.ENOTFOUND,
	// apierr.EMAPQUARANTINED (fails fast), apierr.EMAPUNAVAILABLE (not ready in time, or
	// at once when its image is missing).
	Acquire(ctx context.Context, instanceID string) (Instance, error)

	// Create adds a wanted instance at runtime and starts it. Error codes: apierr.EBADREQUEST,
	// apierr.EIMAGENOTALLOWED (the host does not allow its image; nothing is created),
	// apierr.ECONFLICT (the id exists).
	Create(ctx context.Context, r CreateInstance) (Instance, error)

	// Settle waits, a bounded time, for a created instance's start to end and returns
	// it as it is then. Error codes: apierr.ENOTFOUND, apierr.EMAPCONFIGREFUSED (the
	// map's game refused its config: the instance was undone and is gone).
	Settle(ctx context.Context, instanceID string) (Instance, error)

	// Upgrade moves a ready instance to image with its players connected (see
	// docs/operations.md, "Upgrades"); it returns once the next container runs, and
	// the rest happens in the background (Instance.Upgrade). Error codes:
	// apierr.ENOTFOUND, apierr.EIMAGENOTALLOWED, apierr.EIMAGEMISSING (the engine has
	// no such image), apierr.ECONFLICT (not ready, busy, or upgrading already); nothing
	// is touched when it fails.
	Upgrade(ctx context.Context, instanceID, image string) (Instance, error)

	// UpgradeAll upgrades every ready instance running image from to image to, at most
	// parallel at a time, in the background, and returns the instances it will upgrade.
	UpgradeAll(ctx context.Context, from, to string, parallel int) ([]string, error)

	// HandingOff reports whether instanceID's previous container is handing its
	// players over to its next one: a handoff transfer is granted only then.
	HandingOff(instanceID string) bool

	// Restart replaces the instance's container; it is not counted as a crash. Error
	// codes: apierr.ENOTFOUND, apierr.ECONFLICT (another start or stop is in progress).
	Restart(ctx context.Context, instanceID string) error

	// Stop stops the instance cleanly (SIGTERM, killed after the grace period). Error
	// codes: apierr.ENOTFOUND, apierr.ECONFLICT.
	Stop(ctx context.Context, instanceID string) error
}
