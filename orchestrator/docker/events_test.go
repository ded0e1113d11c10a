package docker

import (
	"testing"

	"github.com/docker/docker/api/types/events"

	"github.com/mapyard/mapyard/orchestrator/supervise"
)

// TestTranslate feeds one stream's events in order: an oom is remembered until that
// container's die, which then reports the OOM kill.
func TestTranslate(t *testing.T) {
	msg := func(action, id string, attrs map[string]string) events.Message {
		return events.Message{Action: events.Action(action), Actor: events.Actor{ID: id, Attributes: attrs}}
	}
	oom := map[string]bool{}
	for _, tc := range []struct {
		name string
		in   events.Message
		want supervise.Event
		ok   bool
	}{
		{"Crash", msg("die", "a", map[string]string{"exitCode": "3"}), supervise.Event{ContainerID: "a", Kind: supervise.EventExited, Exit: supervise.Exit{Code: 3}}, true},
		{"OOMRemembered", msg("oom", "b", nil), supervise.Event{}, false},
		{"OOMThenDie", msg("die", "b", map[string]string{"exitCode": "137"}), supervise.Event{ContainerID: "b", Kind: supervise.EventExited, Exit: supervise.Exit{Code: 137, OOM: true}}, true},
		{"OOMForgottenAfterDie", msg("die", "b", map[string]string{"exitCode": "0"}), supervise.Event{ContainerID: "b", Kind: supervise.EventExited, Exit: supervise.Exit{Code: 0}}, true},
		{"NoExitCode", msg("die", "c", nil), supervise.Event{ContainerID: "c", Kind: supervise.EventExited, Exit: supervise.Exit{Code: -1}}, true},
		{"Unhealthy", msg("health_status: unhealthy", "d", nil), supervise.Event{ContainerID: "d", Kind: supervise.EventUnhealthy}, true},
		{"HealthyDropped", msg("health_status: healthy", "d", nil), supervise.Event{}, false},
		{"StartDropped", msg("start", "e", nil), supervise.Event{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := translate(tc.in, oom)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("translate(%s) = %+v, %v; want %+v, %v", tc.in.Action, got, ok, tc.want, tc.ok)
			}
		})
	}
}
