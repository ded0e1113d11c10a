package supervise

import (
	"slices"

	"github.com/mapyard/mapyard/orchestrator"
)

// An event is something that happened to a map instance. The table below is the whole
// life of an instance: each event, the states it may happen in, and the state it leads
// to. Every state change goes through apply, so the table is the one place to read
// what a map can do next, and a change the table does not allow is refused and logged
// instead of leaving an instance somewhere no rule expects it.
type event string

// The events of an instance's life.
const (
	// evCreate: an operator created the instance (admin create).
	evCreate event = "create"
	// evStart: the instance is wanted and runs no container: at start-up, when a join
	// or transfer needs it, the default map after a clean exit, a quarantine that ended.
	evStart event = "start"
	// evRestart: its container is replaced: a crash or a failed health the restart
	// policy allows, an operator's restart, a move off a warm-pool container, a
	// container without credentials of this orchestrator.
	evRestart event = "restart"
	// evAdopt: a running container of the instance, found at start-up, is kept.
	evAdopt event = "adopt"
	// evRegister: the map called map-ready.
	evRegister event = "register"
	// evHealthy: an adopted map answered its health probe.
	evHealthy event = "healthy"
	// evHandOut: a warm-pool container took the instance.
	evHandOut event = "hand_out"
	// evUnhealthy: no heartbeat, not ready within the start timeout, failing probes.
	evUnhealthy event = "unhealthy"
	// evQuarantine: a failure past the restart policy's allowance.
	evQuarantine event = "quarantine"
	// evStop: an operator's stop or an idle stop began.
	evStop event = "stop"
	// evStopped: a stop ended (or failed, the container kept), or the map exited
	// cleanly on its own.
	evStopped event = "stopped"
	// evImageMissing: the instance's image cannot run (the engine lacks it, or the
	// host no longer allows it).
	evImageMissing event = "image_missing"
	// evConfigRefused: the map's game refused the instance's MapConfig at
	// start-instance.
	evConfigRefused event = "config_refused"
	// evUnschedulable: no node satisfies the map's placement.
	evUnschedulable event = "unschedulable"
)

// A step is one row of the table: where an event may happen and where it leads.
type step struct {
	from []orchestrator.InstanceState
	to   orchestrator.InstanceState
}

const (
	sStarting     = orchestrator.StateStarting
	sReady        = orchestrator.StateReady
	sUnhealthy    = orchestrator.StateUnhealthy
	sRestarting   = orchestrator.StateRestarting
	sQuarantined  = orchestrator.StateQuarantined
	sStopping     = orchestrator.StateStopping
	sStopped      = orchestrator.StateStopped
	sImageMissing = orchestrator.StateImageMissing
	sRefused      = orchestrator.StateConfigRefused
	sUnplaced     = orchestrator.StateUnschedulable
)

// lifecycle is the table. docs/supervision.md draws it; TestLifecycle_Table keeps the
// two and the states of package orchestrator in step.
var lifecycle = map[event]step{
	evCreate:        {from: states(sStopped), to: sStarting},
	evStart:         {from: states(sStopped, sQuarantined), to: sStarting},
	evRestart:       {from: states(sStopped, sStarting, sReady, sUnhealthy, sRestarting, sQuarantined, sImageMissing, sRefused, sUnplaced), to: sRestarting},
	evAdopt:         {from: states(sStopped), to: sStarting},
	evRegister:      {from: states(sStarting, sRestarting, sReady), to: sReady},
	evHealthy:       {from: states(sStarting, sReady), to: sReady},
	evHandOut:       {from: states(sStarting, sRestarting), to: sReady},
	evUnhealthy:     {from: states(sStarting, sRestarting, sReady), to: sUnhealthy},
	evQuarantine:    {from: states(sStarting, sRestarting, sReady, sUnhealthy), to: sQuarantined},
	evStop:          {from: states(sStarting, sReady, sUnhealthy, sRestarting, sQuarantined, sImageMissing, sRefused, sUnplaced), to: sStopping},
	evStopped:       {from: states(sStopping, sStarting, sReady, sUnhealthy, sRestarting), to: sStopped},
	evImageMissing:  {from: states(sStarting, sRestarting), to: sImageMissing},
	evConfigRefused: {from: states(sStarting, sRestarting), to: sRefused},
	evUnschedulable: {from: states(sStarting, sRestarting), to: sUnplaced},
}

func states(s ...orchestrator.InstanceState) []orchestrator.InstanceState { return s }

// allowed reports whether ev may happen to an instance in state from, and where it
// leads.
func allowed(ev event, from orchestrator.InstanceState) (orchestrator.InstanceState, bool) {
	st, ok := lifecycle[ev]
	if !ok || !slices.Contains(st.from, from) {
		return from, false
	}
	return st.to, true
}

// apply moves in through event ev, with reason, by the table: it logs and counts the
// change and wakes everything waiting for one. An event the table does not allow in
// in's state changes nothing, is logged as an error and counted
// (mapyard_map_refused_transitions_total), and apply reports false. The caller holds
// s.mu.
func (s *Supervisor) apply(in *instance, ev event, reason string) bool {
	from := in.State
	to, ok := allowed(ev, from)
	if !ok {
		s.Log.Error("map state change refused", "instance", in.ID, "state", from, "event", ev, "reason", reason)
		s.Metrics.RefusedTransitions.WithLabelValues(string(ev)).Inc()
		return false
	}
	in.State, in.Reason, in.Since = to, reason, s.Now()
	if from == to {
		return true
	}
	s.Log.Info("map state", "instance", in.ID, "from", from, "to", to, "event", ev, "reason", reason, "container", shortID(in.ContainerID), "image", in.Image)
	s.Metrics.transition(in.Image, from, to)
	if s.OnTransition != nil {
		s.OnTransition(in.ID, from, to, reason)
	}
	close(in.changed)
	in.changed = make(chan struct{})
	return true
}
