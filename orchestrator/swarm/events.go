package swarm

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/docker/docker/api/types/swarm"

	"github.com/mapyard/mapyard/orchestrator/supervise"
)

// DefaultEventPoll is Runtime.EventPoll's default: how long a map on another node may
// have ended before the supervisor hears of it.
const DefaultEventPoll = 250 * time.Millisecond

// Events polls, every EventPoll, the deployment's tasks and the Swarm's nodes through
// the manager, which sees every node (an engine's own events stream reports the
// containers of its node only):
//   - a task that ended by itself, on any node, is EventExited with its exit code;
//   - a running task whose node is down (its engine or its network lost) is
//     EventExited with the reason, at once: Swarm itself keeps such a task "running"
//     until the node comes back;
//   - a task Swarm stops while its service still wants its replica (its node was
//     drained) is EventExited with the reason, whether it is still stopping or done:
//     its map exits cleanly on SIGTERM, which must not read as a map that chose to stop.
//
// The first poll reports only tasks on lost or draining nodes: a task that ended before
// the stream (re)connected is the supervisor's resync's, from List, as with the events
// of one engine.
func (r *Runtime) Events(ctx context.Context) (<-chan supervise.Event, <-chan error) {
	out, outErr := make(chan supervise.Event), make(chan error, 1)
	go func() {
		poll := r.EventPoll
		if poll <= 0 {
			poll = DefaultEventPoll
		}
		reported := map[string]bool{} // task ids already reported
		for first := true; ; first = false {
			found, err := r.pollTasks(ctx, reported, first)
			if err != nil {
				if ctx.Err() == nil {
					outErr <- err
				}
				return
			}
			for _, e := range found {
				select {
				case out <- e:
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(poll):
			}
		}
	}()
	return out, outErr
}

// pollTasks returns the events of the deployment's tasks not reported yet, and marks
// them reported; on the first poll, ended tasks are only marked. Tasks no longer listed
// are forgotten.
func (r *Runtime) pollTasks(ctx context.Context, reported map[string]bool, first bool) ([]supervise.Event, error) {
	services, tasks, err := r.deploymentTasks(ctx)
	if err != nil || len(services) == 0 {
		return nil, err
	}
	wants := make(map[string]bool, len(services))
	for _, s := range services {
		m := s.Spec.Mode.Replicated
		wants[s.ID] = m != nil && m.Replicas != nil && *m.Replicas > 0
	}
	nodes, err := r.nodes(ctx)
	if err != nil {
		return nil, err
	}
	var out []supervise.Event
	seen := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		seen[t.ID] = true
		if reported[t.ID] {
			continue
		}
		e, ok := taskEvent(t, wants[t.ServiceID], nodes)
		if !ok {
			continue
		}
		reported[t.ID] = true
		if !first || e.Reason != "" {
			out = append(out, e)
		}
	}
	for id := range reported {
		if !seen[id] {
			delete(reported, id)
		}
	}
	return out, nil
}

// taskEvent is what task t says about its service's map, if anything: wanted says
// whether the service still wants its replica; nodes are the Swarm's nodes by id.
func taskEvent(t swarm.Task, wanted bool, nodes map[string]swarm.Node) (supervise.Event, bool) {
	e := supervise.Event{ContainerID: t.ServiceID, Kind: supervise.EventExited, Exit: supervise.Exit{Code: -1}}
	node := nodes[t.NodeID]
	if cs := t.Status.ContainerStatus; cs != nil {
		e.Exit.Code = cs.ExitCode
	}
	stopping := t.DesiredState != swarm.TaskStateRunning && t.DesiredState != swarm.TaskStateReady
	switch st := t.Status.State; {
	case st == swarm.TaskStateRejected || st == swarm.TaskStateShutdown && t.Status.ContainerStatus == nil:
		return e, false // never ran: Start reports it, or a stop before it ran
	case st == swarm.TaskStateShutdown && wanted:
		e.Reason = fmt.Sprintf("Swarm stopped it on node %s (%s, availability %s)", nodeName(node), shortID(t.NodeID), node.Spec.Availability)
		return e, true
	case terminal(st):
		return e, true
	case st != swarm.TaskStateRunning:
		return e, false
	case node.Status.State == swarm.NodeStateDown:
		e.Reason = fmt.Sprintf("its Swarm node %s (%s) is down: %s", nodeName(node), shortID(t.NodeID), node.Status.Message)
		return e, true
	case wanted && stopping:
		e.Reason = fmt.Sprintf("Swarm is moving it off node %s (%s, availability %s)", nodeName(node), shortID(t.NodeID), node.Spec.Availability)
		return e, true
	}
	return e, false
}

// Nodes lists the Swarm's nodes that can take a map now: ready and active (not
// drained or paused). The warm pool keeps its spares on each; a node that the
// constraints exclude refuses its spares as unschedulable.
func (r *Runtime) Nodes(ctx context.Context) ([]string, error) {
	list, err := r.API.NodeList(ctx, swarm.NodeListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Swarm nodes: %w", err)
	}
	var out []string
	for _, n := range list {
		if n.Status.State == swarm.NodeStateReady && n.Spec.Availability == swarm.NodeAvailabilityActive {
			out = append(out, n.ID)
		}
	}
	sort.Strings(out)
	return out, nil
}

// nodes returns the Swarm's nodes by id.
func (r *Runtime) nodes(ctx context.Context) (map[string]swarm.Node, error) {
	list, err := r.API.NodeList(ctx, swarm.NodeListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Swarm nodes: %w", err)
	}
	out := make(map[string]swarm.Node, len(list))
	for _, n := range list {
		out[n.ID] = n
	}
	return out, nil
}

// nodeDown reports whether task t's node is down, with its name: such a task cannot
// report that it ended.
func (r *Runtime) nodeDown(ctx context.Context, t swarm.Task) (string, bool) {
	if t.NodeID == "" {
		return "", false
	}
	n, _, err := r.API.NodeInspectWithRaw(ctx, t.NodeID)
	if err != nil {
		return "", false
	}
	return nodeName(n), n.Status.State == swarm.NodeStateDown
}

func nodeName(n swarm.Node) string {
	if n.Description.Hostname != "" {
		return n.Description.Hostname
	}
	return shortID(n.ID)
}
