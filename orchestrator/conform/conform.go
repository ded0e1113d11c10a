// Package conform is mapyard's conformance kit: it proves that a map image, written in
// any language, obeys the map contract (docs/map-contract.md) and the player protocol
// (docs/netcode.md). Run starts the image on a throwaway deployment of a real Docker
// engine and plays the orchestrator against it with the orchestrator's own parts — the
// supervisor and its Docker runtime, the control listener, admission with its tickets,
// SQLite on a temporary file — so what an image passes here is what a host runs. It then
// drives the image through every MUST the contract states and reports one Result per
// Check, in the order of Checks.
//
// The kit sees the map's side of the control RPC byte for byte: the maps reach the
// orchestrator through a recording proxy on the map network's gateway (the tap), and
// every request a map makes is validated against its JSON Schema (docs/schemas).
package conform

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/docker/docker/client"
)

// Check is one conformance check: its name, as printed, and the rule of the contract it
// proves, in one line.
type Check struct {
	Name string
	Rule string
}

// Checks lists every check in the order Run runs and reports them. docs/map-contract.md
// ("Conformance") has one row per check, which a test keeps in step with this list.
var Checks = []Check{
	{"container-user", "the image's USER is not root; the orchestrator runs it as 10001:10001"},
	{"map-ready", "once both listeners serve, the map registers (POST /orch/map-ready, per schema, its ids and ports 7000 and 9100) and becomes ready"},
	{"read-only-root", "the map runs in the container the orchestrator makes: read-only root, user 10001:10001, every capability dropped, no-new-privileges"},
	{"health", "GET /health answers 200 per schema with its instance, map, version and the hash of the world generated from its config"},
	{"credential-missing", "control requests without X-Mapyard-Secret are refused 401 with an error body"},
	{"credential-wrong", "control requests with another container's credential are refused 401 with an error body"},
	{"credential-accepted", "control requests with MAP_ORCH_CREDENTIAL are served"},
	{"start-instance-again", "start-instance of the instance the map runs is answered 200 with the /health body"},
	{"start-instance-other", "start-instance of another instance is refused 409 conflict"},
	{"ticket-valid", "a hello with a join ticket is redeemed once and answered a welcome per schema: the redeem's character and epoch, the start config and its world hash, snapshot format 2"},
	{"snapshots", "snapshots are binary frames in format 2 that decode, full first, deltas after acks"},
	{"ping-pong", "a ping is answered a pong carrying its t"},
	{"ticket-used", "a ticket already used is refused ticket_used, the connection closed 1008, the redeem never retried"},
	{"ticket-wrong-map", "a ticket for another instance is refused wrong_map, closed 1008"},
	{"ticket-expired", "an expired ticket is refused ticket_expired, closed 1008"},
	{"ticket-forged", "a ticket signed with another key is refused ticket_invalid, closed 1008"},
	{"heartbeats", "heartbeats per schema, answered registered, count the players the map holds"},
	{"pool-registration", "a blank pool map (MAP_POOL_ID) registers and heartbeats under its pool id with an empty map id, and /health says so"},
	{"start-instance-bad-config", "a config the map cannot run is refused 400 bad_request and the blank map stays free"},
	{"pool-handout", "a blank pool map handed an instance registers again as that instance, generates its world and takes players"},
	{"sigterm-exit", "on SIGTERM the map exits 0 within ORCH_MAP_STOP_GRACE_MS"},
	{"push-on-sigterm", "on SIGTERM the map closes players' WebSockets with 1001 and pushes every character it holds"},
	{"no-writes", "the map writes nothing to disk, through start, a player and its stop (docker diff of a writable probe)"},
	{"restart-after-kill", "a killed map's instance restarts in a new container, registers and takes its player back"},
	{"adoption", "after an orchestrator restart a running map keeps its container, registers again when its heartbeat is answered unregistered, and takes players"},
	{"pushes", "character pushes per schema, quoting the redeem's epoch, revisions above the redeemed state's and growing, attributes passed on unchanged"},
	{"orch-calls", "every call the map makes is a POST of JSON to a contract route, per its schema, with a credential the orchestrator accepts"},
}

// Defaults of Options. StopGrace, HeartbeatTimeout and StartTimeout are the contract's
// (ORCH_MAP_STOP_GRACE_MS, ORCH_HEARTBEAT_TIMEOUT_MS, ORCH_MAP_START_TIMEOUT_MS): an
// image that passes here passes on a host with the default settings.
const (
	DefaultNetwork          = "mapyard"
	DefaultStopGrace        = 10 * time.Second
	DefaultStartTimeout     = 30 * time.Second
	DefaultHeartbeatTimeout = 15 * time.Second
	// DefaultHeartbeatMS and DefaultSnapshotPushMS are what the run sets in
	// MAP_HEARTBEAT_MS and MAP_SNAPSHOT_PUSH_MS, shorter than a host's so that a run
	// sees several of each in seconds; a map SHOULD honour them (a map that does not
	// still passes, more slowly, within the timeouts above).
	DefaultHeartbeatMS    = 500
	DefaultSnapshotPushMS = 1000
)

// Options configure a run. Image is required; the zero value of every other field
// takes its default.
type Options struct {
	// Image is the map image to check, as `docker run` names it.
	Image string
	// Docker is the engine to run it on; nil connects with the environment's settings
	// (DOCKER_HOST and friends), as the orchestrator does.
	Docker *client.Client
	// Network is the map network (ORCH_MAP_NETWORK): the host's, made sure of as the
	// orchestrator makes sure of it. The run's containers are scoped by a deployment of
	// their own and removed at the end, whatever happens.
	Network string
	// StopGrace, StartTimeout and HeartbeatTimeout are the orchestrator's settings of
	// the same names.
	StopGrace        time.Duration
	StartTimeout     time.Duration
	HeartbeatTimeout time.Duration
	// Log receives the in-process orchestrator's own log lines; nil discards them.
	Log *slog.Logger
}

// withDefaults returns o with every zero field set to its default.
func (o Options) withDefaults() Options {
	if o.Network == "" {
		o.Network = DefaultNetwork
	}
	if o.StopGrace <= 0 {
		o.StopGrace = DefaultStopGrace
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.HeartbeatTimeout <= 0 {
		o.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}

// Result is the outcome of one check. Detail says why a check failed, or what a passing
// one saw.
type Result struct {
	Name   string `json:"name"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail,omitempty"`
	Ms     int64  `json:"ms"`
}

// Report is a whole run: the image, every check's result in the order of Checks, and
// the counts.
type Report struct {
	Image  string   `json:"image"`
	Checks []Result `json:"checks"`
	Passed int      `json:"passed"`
	Failed int      `json:"failed"`
}

// OK reports whether every check passed.
func (r *Report) OK() bool { return r.Failed == 0 && r.Passed == len(Checks) }

// Failures returns the names of the checks that failed, in order.
func (r *Report) Failures() []string {
	var out []string
	for _, c := range r.Checks {
		if !c.Pass {
			out = append(out, c.Name)
		}
	}
	return out
}

// Line is how a result is printed: "PASS name" or "FAIL name: why".
func (c Result) Line() string {
	if c.Pass {
		return "PASS " + c.Name
	}
	return "FAIL " + c.Name + ": " + c.Detail
}

// Summary is the closing line of a report, alone on its line: "N passed, M failed".
func (r *Report) Summary() string { return fmt.Sprintf("%d passed, %d failed", r.Passed, r.Failed) }

// WriteText writes the report as people read it: one line per check, then the summary.
func (r *Report) WriteText(w io.Writer) error {
	for _, c := range r.Checks {
		if _, err := fmt.Fprintln(w, c.Line()); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w, r.Summary())
	return err
}
