package supervise

import (
	"context"
	"net"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/mapyard/mapyard/orchestrator"
)

// TestRules_PoolPerNode: on a runtime with many nodes the pool keeps PoolSize spares
// of the image on each node, each pinned there; a handout takes the spare on the node
// running the fewest maps; a node the image's constraints exclude is left alone for a
// while instead of being tried again at once, as is a node that lacks the image (the
// others still get theirs); a node that leaves gets no new spare.
func TestRules_PoolPerNode(t *testing.T) {
	r := newRig(t, func(r *rig) {
		r.PoolSize = 1
		r.rt.nodes = []string{"n1", "n2", "n3", "n4"}
		r.rt.nodeUnplaceable = map[string]bool{r.Image + " n3": true}
		r.rt.nodeMissing = map[string]bool{r.Image + " n4": true}
	})
	r.ready(t, "d-1")                    // the default map, started cold: on no node in particular
	spares := func() map[string]string { // node → pool id, of started spares
		r.Supervisor.mu.Lock()
		defer r.Supervisor.mu.Unlock()
		out := map[string]string{}
		for id, m := range r.pool {
			if m.started {
				out[m.node] = id
			}
		}
		return out
	}
	r.waitFor(t, "a spare on n1 and on n2", func() bool { return len(spares()) == 2 })
	got := spares()
	if got["n1"] == "" || got["n2"] == "" {
		t.Fatalf("spares by node %v, want one on n1 and one on n2", got)
	}
	r.rt.mu.Lock()
	tries := r.rt.calls["start-pool-image "+r.Image]
	r.rt.mu.Unlock()
	r.kickPool()
	r.settle(t)
	r.rt.mu.Lock()
	again := r.rt.calls["start-pool-image "+r.Image]
	r.rt.mu.Unlock()
	if again != tries {
		t.Fatalf("the pool tried n3 again at once: %d starts, then %d", tries, again)
	}
	for _, id := range got {
		if err := r.MapReady(context.Background(), orchestrator.MapRegistration{InstanceID: id}); err != nil {
			t.Fatal(err)
		}
	}

	// Put one map on n1 by hand: the next handout must take n2's spare.
	r.Supervisor.mu.Lock()
	r.instances["d-1"].ports.Node = "n1"
	r.Supervisor.mu.Unlock()
	r.create(t, "b-1")
	inst, err := r.Acquire(context.Background(), "b-1")
	if err != nil {
		t.Fatal(err)
	}
	r.rt.mu.Lock()
	node := r.rt.containers[inst.ContainerID].Ports.Node
	r.rt.mu.Unlock()
	if node != "n2" {
		t.Fatalf("b-1 runs on %q, want n2 (n1 runs d-1)", node)
	}

	// n2 leaves (drained, down): no new spare goes there, even after a handout of
	// the spare it still has.
	r.waitFor(t, "the refill on n2", func() bool { return spares()["n2"] != "" })
	r.rt.mu.Lock()
	r.rt.nodes = []string{"n1"}
	r.rt.mu.Unlock()
	old := spares()["n2"]
	r.Supervisor.mu.Lock()
	r.pool[old].registered = true
	r.instances["b-1"].ports.Node = "n1" // so n2 runs the fewest maps
	r.Supervisor.mu.Unlock()
	r.create(t, "b-2")
	if _, err := r.Acquire(context.Background(), "b-2"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if id := spares()["n2"]; id != "" && id != old {
			t.Fatalf("a spare was started on n2 after it left: %v", spares())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRules_LostMapAvoidsItsNode: a map lost with its node (or unhealthy there) is
// started again with that node to avoid, taking a spare elsewhere first; once a
// container started, nothing is avoided any more.
func TestRules_LostMapAvoidsItsNode(t *testing.T) {
	r := newRig(t, nil)
	first := r.ready(t, "d-1")
	r.Supervisor.mu.Lock()
	r.instances["d-1"].ports.Node = "n2"
	r.Supervisor.mu.Unlock()
	r.handleEvent(Event{ContainerID: first.ContainerID, Kind: EventExited, Exit: Exit{Code: -1}, Reason: "its Swarm node n2 is down"})
	r.settle(t)
	r.rt.mu.Lock()
	var avoided string
	for _, c := range r.rt.containers {
		if c.InstanceID == "d-1" && c.ID != first.ContainerID {
			avoided = c.avoid
		}
	}
	r.rt.mu.Unlock()
	if avoided != "n2" {
		t.Fatalf("the restart avoided %q, want n2", avoided)
	}
	r.Supervisor.mu.Lock()
	left := r.instances["d-1"].avoid
	r.Supervisor.mu.Unlock()
	if left != "" {
		t.Fatalf("still avoiding %q after a container started", left)
	}

	m1 := &poolMember{id: "pool-a", node: "n2"}
	m2 := &poolMember{id: "pool-b", node: "n1"}
	if !better(m2, m1, map[string]int{"n1": 5}, "n2") || better(m1, m2, map[string]int{"n1": 5}, "n2") {
		t.Fatal("a spare on the avoided node was preferred to one elsewhere")
	}
}

// TestRules_UnreachableMapConfirmedAtOnce: a probe that cannot even connect (a map or
// its node gone) is asked again at once, so the map is unhealthy after one round, not
// two; a map that answers badly still gets its interval (see TestRules_ProbeFailures).
func TestRules_UnreachableMapConfirmedAtOnce(t *testing.T) {
	r := newRig(t, nil)
	r.ready(t, "d-1")
	r.rt.mu.Lock()
	r.rt.healthErr = &url.Error{Op: "Get", URL: "http://10.0.0.9:9100/health", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}}
	r.rt.mu.Unlock()
	r.clock.Add(DefaultProbeGrace)
	r.check(context.Background())
	r.settle(t)
	if !r.saw("ready→unhealthy: 2 health probes failed") {
		t.Fatalf("after one round of unreachable probes: %v", r.transitions)
	}
}
