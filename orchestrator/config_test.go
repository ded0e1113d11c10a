package orchestrator_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/envconf"
	"github.com/mapyard/mapyard/orchestrator"
)

func TestConfig_Defaults(t *testing.T) {
	var c orchestrator.Config
	if err := envconf.Load(&c, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	for _, tt := range []struct {
		name      string
		got, want any
	}{
		{"ORCH_PUBLIC_ADDR", c.PublicAddr, "127.0.0.1:8081"},
		{"ORCH_CONTROL_ADDR", c.ControlAddr, "127.0.0.1:9000"},
		{"ORCH_DB_PATH", c.DBPath, "/data/mapyard.db"},
		{"ORCH_CHECKPOINT_MS", c.CheckpointMS, 300000},
		{"ORCH_TRANSFER_TOKEN_TTL_MS", c.TransferTokenTTLMS, 10000},
		{"ORCH_JOIN_TICKET_TTL_MS", c.JoinTicketTTLMS, 10000},
		{"ORCH_HEARTBEAT_TIMEOUT_MS", c.HeartbeatTimeoutMS, 15000},
		{"ORCH_MAP_RESTART_WINDOW_MS", c.MapRestartWindowMS, 60000},
		{"ORCH_MAP_RESTART_MAX_IN_WINDOW", c.MapRestartMaxInWindow, 3},
		{"ORCH_MAP_QUARANTINE_MS", c.MapQuarantineMS, 60000},
		{"ORCH_INTERNAL_RPC_SECRET", c.Secret, ""},
		{"ORCH_MAP_IMAGE", c.MapImage, "mapyard/map:latest"},
		{"ORCH_MAP_IMAGES", strings.Join(c.AllowedMapImages(), ","), "mapyard/map:latest,mapyard/tag:latest"},
		{"ORCH_WARM_POOL_SIZE", c.WarmPoolSize, 1},
		{"ORCH_MAP_IDLE_STOP_MS", c.MapIdleStopMS, 600000},
		{"ORCH_DEPLOYMENT", c.Deployment, "mapyard"},
		{"ORCH_MAP_PROBE_MS", c.MapProbeMS, 2000},
		{"ORCH_MAP_START_TIMEOUT_MS", c.MapStartTimeoutMS, 30000},
		{"ORCH_MAP_ORPHAN_GRACE_MS", c.MapOrphanGraceMS, 10000},
		{"ORCH_ALLOW_FAULT_INJECTION", c.AllowFaultInjection, false},
		{"ORCH_JOIN_RATE_PER_MIN", c.JoinRatePerMin, 30},
		{"ORCH_JOIN_RATE_BURST", c.JoinRateBurst, 10},
		{"ORCH_RATE_LIMIT_CLIENTS", c.RateLimitClients, 65536},
		{"ORCH_TRUSTED_PROXIES", len(c.TrustedProxies), 0},
		{"ORCH_MAX_GUESTS", c.MaxGuests, 10000},
	} {
		if tt.got != tt.want {
			t.Errorf("%s default=%v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func TestConfig_Validate(t *testing.T) {
	for _, tt := range []struct {
		env  string
		want string
	}{
		{"ORCH_PUBLIC_ADDR=8080", "ORCH_PUBLIC_ADDR"},
		{"ORCH_CONTROL_ADDR=0.0.0.0:9000", "ORCH_CONTROL_ADDR"},
		{"ORCH_MAP_RESTART_MAX_IN_WINDOW=-1", "ORCH_MAP_RESTART_MAX_IN_WINDOW"},
		{"ORCH_MAP_CPUS=lots", "ORCH_MAP_CPUS"},
		{"ORCH_DEFAULT_INSTANCE_ID=Default_1", "ORCH_DEFAULT_INSTANCE_ID"},
		{"ORCH_INTERNAL_RPC_SECRET=short", "ORCH_INTERNAL_RPC_SECRET"},
		{"ORCH_LOG_LEVEL=loud", "ORCH_LOG_LEVEL"},
		{"ORCH_JOIN_RATE_BURST=0", "ORCH_JOIN_RATE_BURST"},
		{"ORCH_MAX_GUESTS=-1", "ORCH_MAX_GUESTS"},
		{"ORCH_MAP_IMAGE=mapyard/map latest", "ORCH_MAP_IMAGE"},
		{"ORCH_MAP_IMAGES=mapyard/map:latest,studio game:1", "ORCH_MAP_IMAGES"},
		{"ORCH_RUNTIME=nomad", "ORCH_RUNTIME"},
		{"ORCH_SWARM_SELF=http://orchestrator", "ORCH_SWARM_SELF"},
		{"ORCH_SWARM_SELF=a..b", "ORCH_SWARM_SELF"},
		{"ORCH_SWARM_IMAGE_CONSTRAINTS=studio/arena:2", "ORCH_SWARM_IMAGE_CONSTRAINTS"},
		{"ORCH_SWARM_IMAGE_CONSTRAINTS=studio/arena:2=>node.labels.arena", "ORCH_SWARM_IMAGE_CONSTRAINTS"},
	} {
		t.Run(tt.want, func(t *testing.T) {
			var c orchestrator.Config
			if err := envconf.Load(&c, []string{tt.env}); err != nil {
				t.Fatal(err)
			}
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate()=%v, want an error naming %s", err, tt.want)
			}
		})
	}
}

// TestConfig_MapImages: the allowed list reads as an operator writes it, blanks and a
// trailing comma included.
func TestConfig_MapImages(t *testing.T) {
	var c orchestrator.Config
	if err := envconf.Load(&c, []string{"ORCH_MAP_IMAGES= studio/lobby:2 ,studio/dungeon:7,"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(c.AllowedMapImages(), ","), "studio/lobby:2,studio/dungeon:7"; got != want {
		t.Fatalf("allowed images %q, want %q", got, want)
	}
}

// TestConfig_ImageConstraints: per-image placement reads as an operator writes it.
func TestConfig_ImageConstraints(t *testing.T) {
	var c orchestrator.Config
	if err := envconf.Load(&c, []string{"ORCH_SWARM_IMAGE_CONSTRAINTS=studio/arena:2=>node.labels.arena==true, node.role!=manager; mapyard/tag:latest=>node.labels.tag==1;"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	got, _ := c.ImageConstraints()
	want := map[string][]string{"studio/arena:2": {"node.labels.arena==true", "node.role!=manager"}, "mapyard/tag:latest": {"node.labels.tag==1"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ImageConstraints()=%v, want %v", got, want)
	}
}
