package supervise

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/mapyard/mapyard/orchestrator/keys"
)

// Runtime is what the supervisor needs from whatever runs map containers: start one,
// stop it, remove it, list the deployment's containers, follow their lifecycle events,
// and tell it which instance a handed-out pool container now runs. The Docker Engine
// implements it (package docker); rule tests use a small in-memory fake. Names, labels
// and the deployment scope are the runtime's business: the supervisor speaks in
// container ids and instance ids only.
type Runtime interface {
	// Start creates and starts a container for spec and returns it with its published
	// ports. A stale container of this deployment holding the instance's name is
	// removed first; a name held by anyone else's container is an error, never a removal.
	// An image the engine does not have is an error wrapping ErrImageMissing, and
	// nothing is left behind.
	Start(ctx context.Context, spec Spec) (Container, error)

	// Stop stops a container cleanly: SIGTERM, then SIGKILL once grace has passed. A
	// container that is gone or already stopped counts as stopped. It returns how the
	// container ended, when the runtime still knows.
	Stop(ctx context.Context, id string, grace time.Duration) (Exit, error)

	// Remove removes a container, killing it if it still runs. A container that is
	// already gone is not an error.
	Remove(ctx context.Context, id string) error

	// List returns every container of this deployment, running or not.
	List(ctx context.Context) ([]Container, error)

	// Events streams the deployment's container lifecycle events until ctx ends or the
	// stream breaks (an error on the second channel). Events sent while no stream is
	// open are lost; the supervisor lists again after every (re)connection.
	Events(ctx context.Context) (<-chan Event, <-chan error)

	// Assign records that container id, started blank for the warm pool or as a live
	// upgrade's successor, now runs instanceID as its one container, so that a later
	// List reports it under that instance (Docker renames it to the instance's
	// container name).
	Assign(ctx context.Context, id, instanceID string) error
}

// ErrImageMissing is why Start fails when the engine does not have the spec's image.
// The supervisor does not retry it (waiting does not make an image appear): the
// instance goes to orchestrator.StateImageMissing until an operator restarts it.
var ErrImageMissing = errors.New("image missing on the engine")

// ErrUnschedulable is why Start fails when no node of a cluster satisfies the map's
// placement (Swarm: its constraints). Like a missing image, waiting does not fix it:
// a node must join, or the constraints change.
var ErrUnschedulable = errors.New("no node satisfies the map's placement")

// Spec is what one map container is started with; the runtime adds what every map
// container shares (network, limits, labels).
type Spec struct {
	// InstanceID is the id the map registers under: an instance, or a pool id
	// (mapgen.PoolIDPrefix) for a blank warm-pool map.
	InstanceID string
	MapID      string
	// Image is the container image, one the host allows: maps of different games run
	// different images, and a warm-pool container is blank but of one image.
	Image string
	Pool  bool // a blank warm-pool container
	// Successor marks a live upgrade's next container of InstanceID, started beside
	// the instance's running one under a name of its own; Assign gives it the
	// instance's name once the previous container is gone.
	Successor bool
	Env       []string // the map server's whole environment
	// Generation and KeyID say whose credentials the container holds (see package
	// keys); the runtime keeps them with the container and reports them in Container.
	Generation string
	KeyID      string
	// Node pins the container to one node of a runtime with many (see Nodes): the warm
	// pool keeps its spares on every node. Empty: wherever the runtime places it.
	Node string
	// Avoid names a node not to start on when another can take the container: the one
	// where the instance's last container stopped answering (its node lost, most
	// likely, before the cluster says so). Empty: no such node.
	Avoid string
}

// Nodes is what a runtime that runs maps on several machines (Swarm) also does: list
// the nodes that can take a map now (up, not drained). The warm pool keeps PoolSize
// spares of each image on each of them, so a handout starts a map on any node at once
// and maps spread over nodes; on one engine there is one, unnamed.
type Nodes interface {
	Nodes(ctx context.Context) ([]string, error)
}

// Container is one map container as the runtime reports it.
type Container struct {
	ID string
	// Name is how operators know the container (for logs only).
	Name string
	// InstanceID is the instance the runtime says the container runs (a pool id for an
	// unassigned pool container), or "" for a container that is not a map of ours.
	InstanceID string
	Pool       bool // started blank for the warm pool
	// Successor: started as a live upgrade's next container of InstanceID, and not yet
	// given the instance's name.
	Successor bool
	// Image is the image the container was created from ("" when the runtime cannot
	// tell): a blank pool container can be handed only an instance of its image.
	Image string
	// Identity is whose credentials the container holds: the instance (or pool) id it
	// was created for and its generation; KeyID fingerprints the root that minted them.
	// Both are empty for containers of versions before credentials.
	Identity keys.Identity
	KeyID    string
	Running  bool
	Exit     Exit  // how it ended, when not running
	Ports    Ports // where its listeners are reached, when running
}

// Ports are where a map container's game and control listeners are reached: on one
// engine, ports published on 127.0.0.1 (Host empty), and its game listener's address on
// the map network; on Swarm, the container's own address on the overlay network (Host)
// and the container's own ports, published nowhere.
type Ports struct {
	// Host is the address Game and Control are reached at; empty means 127.0.0.1.
	Host string
	// Node is the node the container runs on, on a runtime with many (see Nodes).
	Node    string
	Game    int
	Control int
	// GameAddr is the game listener on the container's own address on the map network
	// (host:port), which the host reaches directly: the edge's path to the map, without
	// the userland proxy behind a published port. Empty when unknown.
	GameAddr string
}

// ControlURL is the base URL of the map's control listener.
func (p Ports) ControlURL() string {
	host := p.Host
	if host == "" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(p.Control))
}

// Exit is how a container ended.
type Exit struct {
	Code int  // -1 when unknown
	OOM  bool // killed by the kernel's OOM killer
}

// EventKind is what happened to a container.
type EventKind string

// Lifecycle events the supervisor acts on.
const (
	// EventExited: the container's process ended; Event.Exit says how.
	EventExited EventKind = "exited"
	// EventUnhealthy: the image's own health check reports the container unhealthy.
	EventUnhealthy EventKind = "unhealthy"
)

// Event is one container lifecycle event.
type Event struct {
	ContainerID string
	Kind        EventKind
	Exit        Exit // for EventExited
	// Reason says why a container ended when its exit code cannot: its node was lost,
	// or the scheduler moved it (a drained Swarm node). Empty for a plain exit.
	Reason string
}
