// What a map serves: is the contract a map server serves on its control listener: the
// /control/* routes and /health, their messages, and the typed client the orchestrator
// calls them with. It lives with the map server, which serves it, and shares the
// secret header, error answers and HTTP call helper of mapserver/kernel/httpkit; the other
// half of the map contract, what a map calls, is mapserver/kernel/mapcontract.
package mapcontract

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
)

// Map-side routes (served on each map server's control listener).
const (
	PathStartInstance = "/control/start-instance"
	PathHealth        = "/health"
	// PathHandoff asks a map to hand every player over to the next container of its
	// instance (a live upgrade). OPTIONAL: a map that answers 404 is upgraded by a
	// restart instead, its players rejoining.
	PathHandoff = "/control/handoff"
)

// Handoff is the request of POST /control/handoff. The orchestrator sends it to the
// running container of an instance once the instance's next container (Generation) is
// ready and takes new players. The map then admits no new player (a hello is refused
// map_unavailable, and the client's next attempt reaches the next container) and hands
// each character over where it stands, at one tick: it stops taking its inputs, asks
// /orch/request-transfer with Handoff set and the character's exact state at that tick
// (after settling its critical events: every event acknowledged before the request),
// and, once granted, moves the player's connection to Generation without closing it
// (edgelink.KindMove) or, where the connection cannot move, sends the player the
// transfer message as a portal would. It answers when every character is across or
// refused, and may be called again (with the same Generation) to move what is left.
type Handoff struct {
	Generation string `json:"generation"`
}

// HandoffAnswer is the answer of POST /control/handoff: how many characters went
// across since the first call of its generation, by a moved connection (Moved) or a
// transfer message the client follows (Transferred, which counts too the characters
// handed over without a connection: their client's next join lands on the next
// container), and how many are still on this map (Remaining: their transfer was
// refused, or the call ran out of time).
type HandoffAnswer struct {
	Moved       int `json:"moved"`
	Transferred int `json:"transferred"`
	Remaining   int `json:"remaining"`
}

// StartInstance tells a map server which instance it runs and with what MapConfig. A
// blank (warm pool) map takes on the instance it is given; a map started for an
// instance accepts its own instance id again (the call is idempotent) and refuses any
// other with code "conflict".
type StartInstance struct {
	InstanceID string `json:"instanceId"`
	MapID      string `json:"mapId"`
	// Config is the instance's MapConfig as JSON. The orchestrator keeps it opaque; the
	// map server owns its type.
	Config json.RawMessage `json:"config,omitempty"`
}

// MapHealth is the answer of a map's GET /health: whether it is healthy and which
// instance it runs (a blank warm-pool map reports its pool id).
type MapHealth struct {
	Status     string `json:"status"`
	InstanceID string `json:"instanceId"`
	MapID      string `json:"mapId"`
	Version    string `json:"version"`
	// WorldHash is the content hash of the static world generated from the instance's
	// MapConfig, empty until generation finished; browsers recompute and compare it.
	WorldHash string `json:"worldHash,omitempty"`
}

// GamePath is the path of a map's player WebSocket on its game listener; the edge
// proxies the public /maps/{instanceId}/ws there.
const GamePath = "/ws"

// Environment variables the orchestrator sets on a map container (the map's
// mapenv.Config reads them; a test keeps its tags equal to these names).
const (
	// EnvPrefix starts every variable of a map server's configuration.
	EnvPrefix = "MAP_"
	// EnvFaultPrefix starts the fault-injection variables, accepted only where the
	// orchestrator allows fault injection.
	EnvFaultPrefix = "MAP_FAULT_"
	// EnvInstanceID names the instance the container runs.
	EnvInstanceID = "MAP_INSTANCE_ID"
	// EnvMapID names the map (template) the instance runs.
	EnvMapID = "MAP_MAP_ID"
	// EnvPoolID starts a blank warm-pool container, registered under this pool id
	// (pool-<hex>) until /control/start-instance names its instance; a pool container
	// has no MAP_INSTANCE_ID or MAP_MAP_ID, so nothing names a wrong instance.
	EnvPoolID = "MAP_POOL_ID"
	// EnvOrchURL is the base URL of the orchestrator's control listener.
	EnvOrchURL = "MAP_ORCH_URL"
	// EnvGamePort and EnvControlPort are the ports the map listens on inside its
	// container.
	EnvGamePort    = "MAP_GAME_PORT"
	EnvControlPort = "MAP_CONTROL_PORT_BASE"
	// EnvLegacySecret is the shared secret of earlier releases, never passed to maps.
	EnvLegacySecret = "MAP_INTERNAL_RPC_SECRET"
)

// Environment variables through which the orchestrator hands a map container its
// credentials. Each container gets its own pair and nothing else secret.
const (
	// EnvCredential is the map's credential, sent on every call to the orchestrator:
	// it says which container calls, and the orchestrator lets it act for the instance
	// that container runs only.
	EnvCredential = "MAP_CREDENTIAL"
	// EnvOrchCredential is the orchestrator's credential towards this container: the
	// map answers its control routes only to requests that carry it.
	EnvOrchCredential = "MAP_ORCH_CREDENTIAL"
)

// MapClient calls the map side of the control RPC on a map's published control port.
// The orchestrator's supervisor uses it for health probes and to hand out instances,
// with the credential of the container it calls (each map accepts only its own).
type MapClient struct {
	HTTP *http.Client
}

// NewMapClient returns a MapClient whose requests time out after timeout.
func NewMapClient(timeout time.Duration) *MapClient {
	return &MapClient{HTTP: &http.Client{Timeout: timeout, Transport: &http.Transport{
		// A map's control port is on this host or on its overlay network: a live map's
		// kernel accepts at once, even when the map is busy, so a connection not made
		// within a second is a map (or a node) gone.
		DialContext: (&net.Dialer{Timeout: MapDialTimeout}).DialContext,
		// Probes (every ORCH_MAP_PROBE_MS, 2 s) keep a live map's connection in use; a
		// killed container's connection never sees a FIN (its network namespace is
		// gone), so a short idle timeout is what closes it, within seconds of the kill.
		MaxIdleConnsPerHost: 2, IdleConnTimeout: 5 * time.Second,
	}}}
}

// MapDialTimeout bounds the connection to a map's control port (see NewMapClient).
const MapDialTimeout = time.Second

// Health asks the map at baseURL for GET /health, presenting cred. Any non-2xx answer
// is an error; a map that does not know cred answers EUNAUTHORIZED.
func (c *MapClient) Health(ctx context.Context, baseURL, cred string) (MapHealth, error) {
	var h MapHealth
	err := httpkit.Call(ctx, c.HTTP, http.MethodGet, baseURL+PathHealth, cred, nil, &h)
	return h, err
}

// Handoff posts r to the map at baseURL, presenting cred, and returns its answer.
// A map that does not serve it answers 404 (code not_found, or no JSON at all).
func (c *MapClient) Handoff(ctx context.Context, baseURL, cred string, r Handoff) (HandoffAnswer, error) {
	// A handoff answers once every character is across: far beyond the client's
	// timeout for the other control calls, so ctx alone bounds it.
	hc := *c.HTTP
	hc.Timeout = 0
	var a HandoffAnswer
	err := httpkit.Call(ctx, &hc, http.MethodPost, baseURL+PathHandoff, cred, r, &a)
	return a, err
}

// StartInstance posts r to the map at baseURL, presenting cred. Error codes from the
// map: EUNAUTHORIZED, EBADREQUEST, ECONFLICT (the map already runs another instance).
func (c *MapClient) StartInstance(ctx context.Context, baseURL, cred string, r StartInstance) error {
	return httpkit.Call(ctx, c.HTTP, http.MethodPost, baseURL+PathStartInstance, cred, r, nil)
}
