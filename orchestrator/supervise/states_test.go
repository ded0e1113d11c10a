package supervise

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mapyard/mapyard/orchestrator"
)

// refused is how many events had a state change refused by the lifecycle table.
func refused(m *Metrics) float64 { return float64(testutil.CollectAndCount(m.RefusedTransitions)) }

// TestLifecycle_Table checks the table against the states there are and against the
// picture of it in docs/supervision.md: every state is reached by some event and left
// by some event (none is a dead end but by design), and the docs show the table as it is.
func TestLifecycle_Table(t *testing.T) {
	all := []orchestrator.InstanceState{sStarting, sReady, sUnhealthy, sRestarting, sQuarantined, sStopping, sStopped, sImageMissing, sRefused, sUnplaced}
	reached, left := map[orchestrator.InstanceState]bool{}, map[orchestrator.InstanceState]bool{}
	for ev, st := range lifecycle {
		if !slices.Contains(all, st.to) {
			t.Errorf("event %s leads to %q, not a state of package orchestrator", ev, st.to)
		}
		reached[st.to] = true
		for _, f := range st.from {
			left[f] = true
		}
	}
	for _, s := range all {
		if !reached[s] && s != sStopped {
			t.Errorf("no event leads to %s", s)
		}
		if !left[s] {
			t.Errorf("no event leaves %s", s)
		}
	}
	doc, err := os.ReadFile("../../docs/supervision.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := lifecycleTable(); !strings.Contains(string(doc), want) {
		t.Errorf("docs/supervision.md does not show the lifecycle table as it is; put these rows under its header:\n%s", want)
	}
}

// TestLifecycle_RefusesWhatTheTableLacks checks that an event the table does not allow
// changes nothing and is counted: a map registering while it is stopped (a container
// that should not exist) does not make it ready.
func TestLifecycle_RefusesWhatTheTableLacks(t *testing.T) {
	r := newRig(t, nil)
	r.mu.Lock()
	r.Supervisor.mu.Lock()
	in := r.instances["d-1"]
	in.State = sStopped
	ok := r.apply(in, evRegister, "a register out of turn")
	state := in.State
	r.Supervisor.mu.Unlock()
	r.mu.Unlock()
	if ok || state != sStopped {
		t.Fatalf("register on a stopped instance: applied %v, state %s", ok, state)
	}
	if n := refused(r.Metrics); n != 1 {
		t.Fatalf("refused changes counted %v, want 1", n)
	}
	r.Metrics.RefusedTransitions.Reset() // counted on purpose: the rig's check is for rules
}

// lifecycleTable renders the table as markdown rows (event | from | to), in the order
// of the events' declaration, for the docs and their test.
func lifecycleTable() string {
	var b strings.Builder
	for _, ev := range []event{evCreate, evStart, evRestart, evAdopt, evRegister, evHealthy, evHandOut, evUnhealthy, evQuarantine, evStop, evStopped, evImageMissing, evConfigRefused, evUnschedulable} {
		st := lifecycle[ev]
		from := make([]string, len(st.from))
		for i, f := range st.from {
			from[i] = "`" + string(f) + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | `%s` |\n", ev, strings.Join(from, ", "), st.to)
	}
	return b.String()
}
