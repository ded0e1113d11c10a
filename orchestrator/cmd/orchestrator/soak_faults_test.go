package main

// The soak's fault schedule and each fault's recovery (see soak_test.go).

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator"
)

// The faults of the schedule, and the bound each one's recovery is held to: from the
// fault to every W1 bot concerned playing again (a new snapshot) and, for the
// orchestrator and the edge, a new join through the edge answered.
const (
	faultMapKill  = "map-kill"          // docker kill (SIGKILL) of a map's container
	faultOrchKill = "orchestrator-kill" // SIGKILL of the orchestrator, started again on its database
	faultEdge     = "edge-restart"      // the edge closed and a new one opened on its port
	faultMapOOM   = "map-oom"           // a map allocates until its memory limit kills it (MAP_FAULT_ALLOCATE_ON_SIGUSR1)
	faultSlowOrch = "slow-orchestrator" // every map's and the edge's call held soakSlowDelay, for soakHold (PUT /admin/faults)
	faultDiskFull = "disk-full"         // the orchestrator's data volume (a tmpfs) filled to the last byte, for soakHold

	boundMapKill  = 20 * time.Second
	boundOrchKill = 15 * time.Second
	boundEdge     = 10 * time.Second
	boundMapOOM   = 20 * time.Second
	// The slow orchestrator's and the full disk's bounds count their hold: the kit is
	// back within 10 s of the fault's end.
	boundSlowOrch = soakHold + 10*time.Second
	boundDiskFull = soakHold + 10*time.Second

	soakHold      = 8 * time.Second
	soakSlowDelay = 500 * time.Millisecond
)

// soakFaultKinds are the faults a schedule draws from, each at least once.
var soakFaultKinds = []string{faultMapKill, faultOrchKill, faultEdge, faultMapOOM, faultSlowOrch, faultDiskFull}

// soakFault is one fault of the schedule and what its recovery took.
type soakFault struct {
	At     time.Duration // into the run, as scheduled
	Kind   string
	Map    int    // for a map kill, which of the three maps (loot, hall, field)
	Target string // what was killed
	// Began and Ended bound the fault and its recovery; Recovery is their difference,
	// Bound the most it may be.
	Began, Ended    time.Time
	Recovery, Bound time.Duration
	// Lost counts bots that never came back; Err says why the recovery failed, Note
	// what the fault showed besides (the answers seen while it held).
	Lost int
	Err  string
	Note string
}

// soakSchedule is the run's faults, a function of seed and duration alone: one fault
// every 90 s or so (at least one of each kind), in a shuffled order of the kinds, from
// 30 s in to 40 s before the end.
func soakSchedule(seed uint64, dur time.Duration) []*soakFault {
	r := rand.New(rand.NewPCG(seed, 3))
	n := max(len(soakFaultKinds), int(dur/(90*time.Second)))
	first, last := 30*time.Second, dur-40*time.Second
	step := (last - first) / time.Duration(n)
	var out []*soakFault
	var kinds []string
	for i := range n {
		if len(kinds) == 0 {
			kinds = slices.Clone(soakFaultKinds)
			r.Shuffle(len(kinds), func(a, b int) { kinds[a], kinds[b] = kinds[b], kinds[a] })
		}
		jitter := time.Duration(r.Int64N(int64(step/4) + 1))
		out = append(out, &soakFault{At: (first + time.Duration(i)*step + jitter).Round(time.Second), Kind: kinds[0], Map: r.IntN(3)})
		kinds = kinds[1:]
	}
	return out
}

// inFaultWindow reports whether at falls within 10 s of a fault or its recovery. The
// caller holds s.mu.
func (s *soak) inFaultWindow(at time.Time) bool {
	for _, f := range s.faults {
		end := f.Ended
		if end.IsZero() {
			end = time.Now()
		}
		if at.After(f.Began.Add(-10*time.Second)) && at.Before(end.Add(10*time.Second)) {
			return true
		}
	}
	return false
}

// inject causes fault f, waits for the kit to recover and holds the recovery to its
// bound.
func (s *soak) inject(t *testing.T, f *soakFault) {
	s.mu.Lock()
	f.Began = time.Now()
	s.faults = append(s.faults, f)
	s.mu.Unlock()
	var bots []*client.Client
	var err error
	switch f.Kind {
	case faultMapKill:
		m := []string{s.loot.InstanceID, s.hall.InstanceID, s.field.InstanceID}[f.Map]
		f.Target, f.Bound, bots = m, boundMapKill, s.swarms[m].Bots()
		old := s.k.instance(t, m).ContainerID
		if err := s.k.cli.ContainerKill(context.Background(), old, "KILL"); err != nil {
			t.Fatalf("docker kill %s: %v", m, err)
		}
		waitFor(t, m+" restarted in a new container", 60*time.Second, func() bool {
			inst := s.k.instance(t, m)
			return inst.State == orchestrator.StateReady && inst.ContainerID != old
		})
	case faultOrchKill:
		f.Target, f.Bound = fmt.Sprintf("orchestrator (pid %d)", s.k.orch.cmd.Process.Pid), boundOrchKill
		if err := s.k.orch.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		s.k.orch.wait(10 * time.Second)
		s.k.orch = startOrchestrator(t, s.k.env)
		s.orchPID.Store(int64(s.k.orch.cmd.Process.Pid))
		waitStatus(t, s.k.orch.public+"/readyz", http.StatusOK, 60*time.Second)
		err = s.joinWorks(f.Began.Add(3 * f.Bound))
	case faultEdge:
		f.Target, f.Bound = "edge "+s.edgeAddr, boundEdge
		if err := s.k.edge.Close(context.Background()); err != nil {
			t.Logf("soak: closing the edge: %v", err)
		}
		s.k.edge = s.openEdge(t)
		err = s.joinWorks(f.Began.Add(3 * f.Bound))
	case faultMapOOM:
		m := []string{s.loot.InstanceID, s.hall.InstanceID, s.field.InstanceID}[f.Map]
		f.Target, f.Bound, bots = m, boundMapOOM, s.swarms[m].Bots()
		err = s.outOfMemory(t, m)
	case faultSlowOrch:
		f.Target, f.Bound = fmt.Sprintf("orchestrator's control listener (+%s a call)", soakSlowDelay), boundSlowOrch
		f.Note, err = s.slowOrchestrator(t)
	case faultDiskFull:
		f.Target, f.Bound = "data volume "+filepath.Dir(s.k.dbPath), boundDiskFull
		f.Note, err = s.diskFull(t)
	}
	if f.Kind != faultMapKill && f.Kind != faultMapOOM {
		for _, sw := range s.swarms {
			bots = append(bots, sw.Bots()...)
		}
	}
	lost, why := playersBack(bots, f.Began.Add(3*f.Bound))
	s.mu.Lock()
	f.Ended = time.Now()
	f.Recovery, f.Lost = f.Ended.Sub(f.Began), lost
	s.mu.Unlock()
	switch {
	case err != nil:
		f.Err = err.Error()
	case lost > 0:
		f.Err = fmt.Sprintf("%d of %d players not back (%s)", lost, len(bots), why)
	case f.Recovery > f.Bound:
		f.Err = fmt.Sprintf("recovered in %s, over its bound %s", f.Recovery.Round(time.Millisecond), f.Bound)
	}
	t.Logf("soak: %s of %s at %s: %d players back in %s (bound %s) %s %s", f.Kind, f.Target, f.Began.Sub(s.start).Round(time.Second),
		len(bots)-lost, f.Recovery.Round(time.Millisecond), f.Bound, f.Note, f.Err)
	if f.Err != "" {
		t.Errorf("soak: %s of %s: %s", f.Kind, f.Target, f.Err)
	}
}

// joinWorks retries a guest's join through the edge, up to its first snapshot, until
// one works or deadline passes.
func (s *soak) joinWorks(deadline time.Time) error {
	for {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		c, err := s.joinOnce(ctx, `{}`)
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no join through the edge: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// playersBack waits until every bot that still runs received a snapshot after the call,
// or deadline passes, and returns how many did not (an ended bot never does) and what
// those bots' counters say.
func playersBack(bots []*client.Client, deadline time.Time) (int, string) {
	seen := make([]int64, len(bots))
	for i, c := range bots {
		seen[i] = c.Stats().Snapshots
	}
	for {
		var missing []*client.Client
		for i, c := range bots {
			if c.Stats().Snapshots == seen[i] {
				missing = append(missing, c)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			ended, resumes, rejoins := 0, int64(0), int64(0)
			for _, c := range missing {
				select {
				case <-c.Done():
					ended++
				default:
				}
				st := c.Stats()
				resumes, rejoins = resumes+st.Resumes, rejoins+st.Rejoins
			}
			return len(missing), fmt.Sprintf("%d ended, %d resumes and %d rejoins among them", ended, resumes, rejoins)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// postJoin asks the edge at base for a join ticket with body.
func postJoin(ctx context.Context, base, body string, out *client.Ticket) error {
	return httpkit.Call(ctx, http.DefaultClient, http.MethodPost, base+public.PathJoin, "", rawJSON(body), out)
}

// rawJSON is a JSON document sent as it is.
type rawJSON string

// MarshalJSON returns the document.
func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }
