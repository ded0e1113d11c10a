package swarm

import (
	"strings"
	"testing"

	"github.com/docker/docker/api/types/swarm"
)

// TestTaskEvent: what one task says about its map, for each way a task ends or
// cannot report that it did.
func TestTaskEvent(t *testing.T) {
	up := swarm.Node{ID: "n1", Status: swarm.NodeStatus{State: swarm.NodeStateReady}}
	down := swarm.Node{ID: "n2", Description: swarm.NodeDescription{Hostname: "node-2"}, Status: swarm.NodeStatus{State: swarm.NodeStateDown, Message: "heartbeat failure"}}
	drained := swarm.Node{ID: "n3", Spec: swarm.NodeSpec{Availability: swarm.NodeAvailabilityDrain}, Status: swarm.NodeStatus{State: swarm.NodeStateReady}}
	nodes := map[string]swarm.Node{"n1": up, "n2": down, "n3": drained}
	exited := func(code int) *swarm.ContainerStatus { return &swarm.ContainerStatus{ContainerID: "c", ExitCode: code} }
	task := func(node string, st, desired swarm.TaskState, cs *swarm.ContainerStatus) swarm.Task {
		return swarm.Task{ID: "t", ServiceID: "svc", NodeID: node, DesiredState: desired, Status: swarm.TaskStatus{State: st, ContainerStatus: cs}}
	}
	for _, tt := range []struct {
		name   string
		task   swarm.Task
		wanted bool
		report bool
		code   int
		reason string
	}{
		{"running", task("n1", swarm.TaskStateRunning, swarm.TaskStateRunning, nil), true, false, 0, ""},
		{"starting", task("n1", swarm.TaskStateStarting, swarm.TaskStateRunning, nil), true, false, 0, ""},
		{"crashed", task("n1", swarm.TaskStateFailed, swarm.TaskStateShutdown, exited(137)), true, true, 137, ""},
		{"ended by itself", task("n1", swarm.TaskStateComplete, swarm.TaskStateShutdown, exited(0)), true, true, 0, ""},
		{"stopped by the supervisor", task("n1", swarm.TaskStateShutdown, swarm.TaskStateShutdown, exited(0)), false, true, 0, ""},
		{"never ran", task("n1", swarm.TaskStateRejected, swarm.TaskStateShutdown, nil), true, false, 0, ""},
		{"node lost", task("n2", swarm.TaskStateRunning, swarm.TaskStateRunning, nil), true, true, -1, "node-2 (n2) is down: heartbeat failure"},
		{"draining", task("n3", swarm.TaskStateRunning, swarm.TaskStateShutdown, nil), true, true, -1, "moving it off node n3"},
		{"drained", task("n3", swarm.TaskStateShutdown, swarm.TaskStateShutdown, exited(0)), true, true, 0, "Swarm stopped it on node n3"},
		{"stopping on a drained node, asked", task("n3", swarm.TaskStateRunning, swarm.TaskStateShutdown, nil), false, false, 0, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := taskEvent(tt.task, tt.wanted, nodes)
			if ok != tt.report {
				t.Fatalf("reported %v (%+v), want %v", ok, e, tt.report)
			}
			if !ok {
				return
			}
			if e.ContainerID != "svc" || (tt.reason == "" && e.Exit.Code != tt.code) || (tt.reason == "") != (e.Reason == "") || !strings.Contains(e.Reason, tt.reason) {
				t.Fatalf("event %+v, want service svc, code %d, reason containing %q", e, tt.code, tt.reason)
			}
		})
	}
}
