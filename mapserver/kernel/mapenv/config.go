// Package mapenv is the MAP_* environment of a map container: what the orchestrator
// sets on every map container it starts (and passes through from the host), and what
// the map server reads at start. It sits in the kernel because both sides rely on the
// same names and rules.
package mapenv

import (
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
)

// Config is every tunable of a map server, read from the environment. The orchestrator
// sets MAP_INSTANCE_ID and MAP_MAP_ID (or MAP_POOL_ID on a blank warm-pool container),
// MAP_ORCH_URL and the container's own two credentials (MAP_CREDENTIAL,
// MAP_ORCH_CREDENTIAL) on each container and passes the
// host's other MAP_* variables through. A map never holds the orchestrator's secret.
type Config struct {
	InstanceID string `env:"MAP_INSTANCE_ID" envDefault:"dev-1" help:"instance id this server runs (set by the orchestrator)"`
	MapID      string `env:"MAP_MAP_ID" envDefault:"default" help:"map id this server runs (set by the orchestrator)"`
	OrchURL    string `env:"MAP_ORCH_URL" envDefault:"http://host.docker.internal:9000" help:"base URL of the orchestrator's control listener"`
	Credential string `env:"MAP_CREDENTIAL" help:"this container's credential, sent on every call to the orchestrator (required; set by the orchestrator, or printed by fakeorch)"`
	// OrchCredential is what the orchestrator presents on this map's control routes.
	OrchCredential string `env:"MAP_ORCH_CREDENTIAL" help:"the orchestrator's credential towards this container: control requests without it get 401 (required; set by the orchestrator, or printed by fakeorch)"`

	ListenHost  string `env:"MAP_LISTEN_HOST" envDefault:"0.0.0.0" help:"address both listeners bind; inside a container the host publishes them on 127.0.0.1 only"`
	GamePort    int    `env:"MAP_GAME_PORT" envDefault:"7000" help:"port of the player WebSocket listener"`
	ControlPort int    `env:"MAP_CONTROL_PORT_BASE" envDefault:"9100" help:"port of the control listener"`

	HeartbeatMS    int `env:"MAP_HEARTBEAT_MS" envDefault:"5000" help:"interval between heartbeats to the orchestrator"`
	SnapshotPushMS int `env:"MAP_SNAPSHOT_PUSH_MS" envDefault:"10000" help:"interval between state snapshot pushes to the orchestrator"`
	TickHz         int `env:"MAP_TICK_HZ" envDefault:"30" help:"simulation ticks per second"`
	SnapshotHz     int `env:"MAP_SNAPSHOT_HZ" envDefault:"15" help:"snapshots per second sent to each client"`
	ViewCap        int `env:"MAP_VIEW_CAP" envDefault:"128" help:"entities one client's snapshot shows at most: in a crowd, the nearest ones plus the client itself and what chases it (0 = no cap)"`
	ViewNear       int `env:"MAP_VIEW_NEAR" envDefault:"32" help:"entities of a crowded snapshot whose every move a client sees, the nearest (with itself and what chases it); the rest it sees move like distant ones, once every 12 snapshots (0 = all within 60 units)"`
	// GCPercent is the collector's GOGC. A map's heap is mostly long-lived state per
	// player (views, baselines, queues) with little garbage between snapshot rounds, so
	// collecting at half the heap's growth instead of Go's default of all of it keeps
	// the memory per player about a quarter lower for little CPU (docs/benchmarks.md).
	GCPercent   int `env:"MAP_GC_PERCENT" envDefault:"50" help:"the Go collector's GOGC for the map process: collect when the heap has grown by this percent of what the last collection kept (lower: less memory, more collector CPU; 0: the Go runtime's own, GOGC or 100)"`
	ResumeTTLMS int `env:"MAP_RESUME_TTL_MS" envDefault:"10000" help:"how long a character whose connection dropped waits for its client to resume with the welcome's resumeToken"`
	// RecoveryEveryTicks is the maintenance boundary of the critical-item recovery pass,
	// counted in simulation ticks so that the same inputs give the same recoveries.
	RecoveryEveryTicks int `env:"MAP_RECOVERY_EVERY_TICKS" envDefault:"300" help:"the critical-item recovery pass runs after every tick that is a multiple of this (300 = every 10 s at 30 Hz; 0 = never)"`

	// Per-connection limits on what a player sends (docs/netcode.md, "Limits"). The
	// defaults leave twice what a moving client sends or more (46 messages, 4.7 KB a
	// second); a rate of 0 turns that limit off.
	ConnMsgRate   float64 `env:"MAP_CONN_MSG_RATE" envDefault:"100" help:"messages per second one player connection may send, sustained; more are refused with rate_limited (0 = no limit)"`
	ConnMsgBurst  int     `env:"MAP_CONN_MSG_BURST" envDefault:"200" help:"messages one player connection may send at once above MAP_CONN_MSG_RATE"`
	ConnByteRate  float64 `env:"MAP_CONN_BYTE_RATE" envDefault:"16384" help:"payload bytes per second one player connection may send, sustained; more are refused with rate_limited (0 = no limit)"`
	ConnByteBurst int     `env:"MAP_CONN_BYTE_BURST" envDefault:"65536" help:"payload bytes one player connection may send at once above MAP_CONN_BYTE_RATE; at least 4096 (one message of the read limit)"`

	AllowedOrigins string `env:"MAP_ALLOWED_ORIGINS" envDefault:"" help:"comma-separated browser origins (scheme://host[:port]) allowed to open player WebSockets besides the host the page came from; empty = same host only"`

	LogLevel string `env:"MAP_LOG_LEVEL" envDefault:"info" help:"debug, info, warn or error"`

	// PoolID is set by the orchestrator on warm-pool containers instead of
	// MAP_INSTANCE_ID and MAP_MAP_ID: the server starts blank, registers under the
	// pool id and takes on the instance POST /control/start-instance names, so nothing
	// in a pool container's environment names an instance it may never run.
	PoolID string `env:"MAP_POOL_ID" help:"start blank for the warm pool, registered under this pool id (pool-<hex>), until /control/start-instance names the instance; MAP_INSTANCE_ID and MAP_MAP_ID are then ignored (set by the orchestrator)"`

	// Fault injection, for tests of the orchestrator's supervision only. All are off by
	// default and nothing in a normal deployment sets them.
	FaultExitAfterMS    int  `env:"MAP_FAULT_EXIT_AFTER_MS" envDefault:"0" help:"TESTS ONLY: exit with code 3 this many ms after start (0 = off)"`
	FaultFailHealth     bool `env:"MAP_FAULT_FAIL_HEALTH" envDefault:"false" help:"TESTS ONLY: answer /health with 503 (false = off)"`
	FaultIgnoreSIGTERM  bool `env:"MAP_FAULT_IGNORE_SIGTERM" envDefault:"false" help:"TESTS ONLY: ignore SIGTERM, so stopping needs the kill after the grace period (false = off)"`
	FaultPanicAtTick    int  `env:"MAP_FAULT_PANIC_AT_TICK" envDefault:"0" help:"TESTS ONLY: the game panics in this tick, a game's defect that ends the map with a non-zero status (0 = off)"`
	FaultHandoffDelayMS int  `env:"MAP_FAULT_HANDOFF_DELAY_MS" envDefault:"0" help:"TESTS ONLY: a live upgrade's handoff cut waits this many ms after the handoff call, its characters held meanwhile (0 = off)"`
	FaultAllocOnSIGUSR1 bool `env:"MAP_FAULT_ALLOCATE_ON_SIGUSR1" envDefault:"false" help:"TESTS ONLY: on SIGUSR1, allocate and touch memory without bound until the container's memory limit has the kernel kill the process (false = off)"`
}

// Validate checks values that parse but make no sense, naming the variable.
func (c *Config) Validate() error {
	if c.PoolID != "" && !mapgen.IsPoolID(c.PoolID) {
		return fmt.Errorf("MAP_POOL_ID=%q: must start with %s and be %s", c.PoolID, mapgen.PoolIDPrefix, mapgen.IDRule)
	}
	if !mapgen.ValidID(c.InstanceID) {
		return fmt.Errorf("MAP_INSTANCE_ID=%q: must be %s", c.InstanceID, mapgen.IDRule)
	}
	if !mapgen.ValidID(c.MapID) {
		return fmt.Errorf("MAP_MAP_ID=%q: must be %s", c.MapID, mapgen.IDRule)
	}
	if u, err := url.Parse(c.OrchURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("MAP_ORCH_URL=%q: must be an http(s) URL", c.OrchURL)
	}
	if len(c.Credential) < 16 {
		return fmt.Errorf("MAP_CREDENTIAL: required, at least 16 characters")
	}
	if len(c.OrchCredential) < 16 {
		return fmt.Errorf("MAP_ORCH_CREDENTIAL: required, at least 16 characters")
	}
	if net.ParseIP(c.ListenHost) == nil {
		return fmt.Errorf("MAP_LISTEN_HOST=%q: must be an IP address", c.ListenHost)
	}
	for _, v := range []struct {
		name          string
		val, min, max int
	}{
		{"MAP_GAME_PORT", c.GamePort, 0, 65535},
		{"MAP_CONTROL_PORT_BASE", c.ControlPort, 0, 65535},
		{"MAP_HEARTBEAT_MS", c.HeartbeatMS, 100, 3600000},
		{"MAP_SNAPSHOT_PUSH_MS", c.SnapshotPushMS, 100, 3600000},
		{"MAP_TICK_HZ", c.TickHz, 1, 240},
		{"MAP_SNAPSHOT_HZ", c.SnapshotHz, 1, 240},
		{"MAP_RESUME_TTL_MS", c.ResumeTTLMS, 100, 3600000},
		{"MAP_VIEW_CAP", c.ViewCap, 0, 65536},
		{"MAP_VIEW_NEAR", c.ViewNear, 0, 65536},
		{"MAP_GC_PERCENT", c.GCPercent, 0, 1000},
		{"MAP_RECOVERY_EVERY_TICKS", c.RecoveryEveryTicks, 0, 1 << 30},
		{"MAP_FAULT_EXIT_AFTER_MS", c.FaultExitAfterMS, 0, 86400000},
		{"MAP_FAULT_PANIC_AT_TICK", c.FaultPanicAtTick, 0, 1 << 30},
		{"MAP_FAULT_HANDOFF_DELAY_MS", c.FaultHandoffDelayMS, 0, 600000},
	} {
		if v.val < v.min || v.val > v.max {
			return fmt.Errorf("%s=%d: must be between %d and %d", v.name, v.val, v.min, v.max)
		}
	}
	if c.ConnMsgRate < 0 || c.ConnMsgRate > 1e6 {
		return fmt.Errorf("MAP_CONN_MSG_RATE=%g: must be between 0 (no limit) and 1000000", c.ConnMsgRate)
	}
	if c.ConnByteRate < 0 || c.ConnByteRate > 1e9 {
		return fmt.Errorf("MAP_CONN_BYTE_RATE=%g: must be between 0 (no limit) and 1000000000", c.ConnByteRate)
	}
	if c.ConnMsgRate > 0 && (c.ConnMsgBurst < 1 || c.ConnMsgBurst > 1e6) {
		return fmt.Errorf("MAP_CONN_MSG_BURST=%d: must be between 1 and 1000000", c.ConnMsgBurst)
	}
	if c.ConnByteRate > 0 && (c.ConnByteBurst < MinConnByteBurst || c.ConnByteBurst > 1e9) {
		return fmt.Errorf("MAP_CONN_BYTE_BURST=%d: must be between %d (one message of the read limit) and 1000000000", c.ConnByteBurst, MinConnByteBurst)
	}
	if c.SnapshotHz > c.TickHz {
		return fmt.Errorf("MAP_SNAPSHOT_HZ=%d: must not exceed MAP_TICK_HZ=%d", c.SnapshotHz, c.TickHz)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("MAP_LOG_LEVEL=%q: must be debug, info, warn or error", c.LogLevel)
	}
	return nil
}

// Blank reports whether the server starts blank for the warm pool (MAP_POOL_ID set).
func (c *Config) Blank() bool { return c.PoolID != "" }

// Identity is what the server registers and reports itself as until
// /control/start-instance names an instance: its pool id and no map when blank, else
// MAP_INSTANCE_ID and MAP_MAP_ID.
func (c *Config) Identity() (instanceID, mapID string) {
	if c.Blank() {
		return c.PoolID, ""
	}
	return c.InstanceID, c.MapID
}

// MinConnByteBurst is the smallest MAP_CONN_BYTE_BURST: a bucket smaller than the
// largest frame a connection may send (its read limit) would refuse that frame forever.
const MinConnByteBurst = 4 << 10

// Heartbeat is MAP_HEARTBEAT_MS as a duration.
func (c *Config) Heartbeat() time.Duration { return time.Duration(c.HeartbeatMS) * time.Millisecond }

// ResumeTTL is MAP_RESUME_TTL_MS as a duration.
func (c *Config) ResumeTTL() time.Duration { return time.Duration(c.ResumeTTLMS) * time.Millisecond }

// SnapshotPush is MAP_SNAPSHOT_PUSH_MS as a duration.
func (c *Config) SnapshotPush() time.Duration {
	return time.Duration(c.SnapshotPushMS) * time.Millisecond
}
