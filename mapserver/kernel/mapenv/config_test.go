package mapenv_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/envconf"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapenv"
)

const testSecret = "0123456789abcdef0123"

func TestConfig_Defaults(t *testing.T) {
	var c mapenv.Config
	if err := envconf.Load(&c, []string{"MAP_CREDENTIAL=" + testSecret, "MAP_ORCH_CREDENTIAL=" + testSecret}); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	for _, tt := range []struct {
		name      string
		got, want int
	}{
		{"MAP_HEARTBEAT_MS", c.HeartbeatMS, 5000},
		{"MAP_SNAPSHOT_PUSH_MS", c.SnapshotPushMS, 10000},
		{"MAP_TICK_HZ", c.TickHz, 30},
		{"MAP_SNAPSHOT_HZ", c.SnapshotHz, 15},
		{"MAP_CONTROL_PORT_BASE", c.ControlPort, 9100},
		{"MAP_CONN_MSG_RATE", int(c.ConnMsgRate), 100},
		{"MAP_CONN_MSG_BURST", c.ConnMsgBurst, 200},
		{"MAP_CONN_BYTE_RATE", int(c.ConnByteRate), 16384},
		{"MAP_CONN_BYTE_BURST", c.ConnByteBurst, 65536},
		{"MAP_VIEW_CAP", c.ViewCap, 128},
		{"MAP_VIEW_NEAR", c.ViewNear, 32},
	} {
		if tt.got != tt.want {
			t.Errorf("%s default=%d, want %d", tt.name, tt.got, tt.want)
		}
	}
}

func TestConfig_Validate(t *testing.T) {
	for _, tt := range []struct{ env, want string }{
		{"MAP_TICK_HZ=0", "MAP_TICK_HZ"},
		{"MAP_SNAPSHOT_HZ=60", "MAP_SNAPSHOT_HZ"},
		{"MAP_ORCH_URL=ftp://x", "MAP_ORCH_URL"},
		{"MAP_INSTANCE_ID=../etc", "MAP_INSTANCE_ID"},
		{"MAP_CREDENTIAL=", "MAP_CREDENTIAL"}, {"MAP_ORCH_CREDENTIAL=short", "MAP_ORCH_CREDENTIAL"},
		{"MAP_CONN_MSG_RATE=-1", "MAP_CONN_MSG_RATE"}, {"MAP_CONN_MSG_BURST=0", "MAP_CONN_MSG_BURST"},
		{"MAP_CONN_BYTE_RATE=-5", "MAP_CONN_BYTE_RATE"}, {"MAP_CONN_BYTE_BURST=1000", "MAP_CONN_BYTE_BURST"},
		{"MAP_VIEW_CAP=-1", "MAP_VIEW_CAP"},
	} {
		t.Run(tt.want, func(t *testing.T) {
			var c mapenv.Config
			if err := envconf.Load(&c, []string{"MAP_CREDENTIAL=" + testSecret, "MAP_ORCH_CREDENTIAL=" + testSecret, tt.env}); err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate()=%v, want an error naming %s", err, tt.want)
			}
		})
	}
}

// TestConfig_EnvNamesAreTheContract: the variables the orchestrator sets on a map
// container are read under exactly the names mapcontract declares (struct tags cannot
// name constants, so this test keeps the two one rule).
func TestConfig_EnvNamesAreTheContract(t *testing.T) {
	want := map[string]string{
		"InstanceID": mapcontract.EnvInstanceID, "MapID": mapcontract.EnvMapID, "OrchURL": mapcontract.EnvOrchURL,
		"Credential": mapcontract.EnvCredential, "OrchCredential": mapcontract.EnvOrchCredential,
		"GamePort": mapcontract.EnvGamePort, "ControlPort": mapcontract.EnvControlPort, "PoolID": mapcontract.EnvPoolID,
	}
	typ := reflect.TypeFor[mapenv.Config]()
	for field, name := range want {
		f, ok := typ.FieldByName(field)
		if !ok {
			t.Fatalf("Config has no field %s", field)
		}
		if got := f.Tag.Get("env"); got != name {
			t.Errorf("Config.%s reads %q, the contract says %q", field, got, name)
		}
	}
	for i := range typ.NumField() {
		if tag := typ.Field(i).Tag.Get("env"); tag != "" && !strings.HasPrefix(tag, mapcontract.EnvPrefix) {
			t.Errorf("Config.%s reads %q, outside %s*", typ.Field(i).Name, tag, mapcontract.EnvPrefix)
		}
	}
}
