package supervise

import (
	"context"
	"fmt"
	"time"

	"github.com/mapyard/mapyard/orchestrator"
)

// watchEvents follows the runtime's events stream until ctx ends. Every
// (re)connection is followed by a resync from List, because events sent while the
// stream was down are lost: a container that died meanwhile is found by its state
// instead.
func (s *Supervisor) watchEvents(ctx context.Context) {
	for delay := 100 * time.Millisecond; ctx.Err() == nil; delay = min(2*delay, 5*time.Second) {
		sub, cancel := context.WithCancel(ctx)
		msgs, errs := s.Runtime.Events(sub)
		if err := s.resync(ctx); err != nil {
			s.Log.Warn("resync after events (re)connect failed", "err", err)
		}
		connected := time.Now()
	loop:
		for {
			select {
			case <-ctx.Done():
				cancel()
				return
			case err := <-errs:
				if ctx.Err() == nil {
					s.Log.Warn("container events stream ended; reconnecting", "err", err)
					s.Metrics.EventsReconnects.Inc()
				}
				break loop
			case e := <-msgs:
				s.handleEvent(e)
			}
		}
		cancel()
		if time.Since(connected) > time.Minute {
			delay = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// handleEvent applies one container event: an exit (with its code, and whether the
// OOM killer ended it), or the image's health check reporting unhealthy.
func (s *Supervisor) handleEvent(e Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e.Kind {
	case EventExited:
		if e.Reason != "" {
			s.lost(e.ContainerID, e.Reason)
			return
		}
		s.exited(e.ContainerID, e.Exit, "exit event")
	case EventUnhealthy:
		if in := s.byContainerLocked(e.ContainerID); in != nil && in.State == orchestrator.StateReady {
			s.unhealthy(in, "container health check reports unhealthy")
		}
	}
}

// byContainerLocked returns the instance whose current container is id.
func (s *Supervisor) byContainerLocked(id string) *instance {
	if id == "" {
		return nil
	}
	for _, in := range s.instances {
		if in.ContainerID == id {
			return in
		}
	}
	return nil
}

// exited handles the end of container id. An exit the supervisor caused (stop,
// restart) or a clean exit (code 0, the map flushed and stopped on SIGTERM) is never
// counted as a crash; any other exit is, and is restarted under the restart policy.
// The caller holds s.mu.
func (s *Supervisor) exited(id string, exit Exit, source string) {
	code, oom := exit.Code, exit.OOM
	if s.poolExitedLocked(id, code) {
		return
	}
	in := s.byContainerLocked(id)
	if in == nil {
		return // an old container of an instance, already replaced
	}
	c := code
	in.LastExitCode, in.OOMKilled, in.Registered = &c, oom, false
	s.Metrics.Exits.WithLabelValues(exitKind(code, oom)).Inc()
	if in.expectExit == id || in.State == orchestrator.StateStopping {
		s.Log.Info("map container exited as asked", "instance", in.ID, "exitCode", code, "source", source)
		return
	}
	switch {
	case oom:
		s.failed(in, fmt.Sprintf("killed by the kernel OOM killer (exit code %d)", code))
	case code == 0:
		s.apply(in, evStopped, "exited cleanly with code 0 (not a crash)")
		in.ContainerID, in.GamePort, in.ControlPort, in.GameAddr = "", 0, 0, ""
		if in.ID == s.DefaultInstanceID {
			s.spawn(in, evStart, "the default map is always wanted")
		}
	default:
		s.failed(in, fmt.Sprintf("container exited with code %d", code))
	}
}

// lost handles a container that ended, or will, for a reason outside it (its node was
// lost or drained): unless the supervisor was stopping it anyway, it is a failure, and
// the instance restarts elsewhere under the restart policy. Even a clean exit counts:
// the map did not choose to stop. The caller holds s.mu.
func (s *Supervisor) lost(id, reason string) {
	if s.poolExitedLocked(id, -1) {
		return
	}
	in := s.byContainerLocked(id)
	if in == nil {
		return
	}
	in.Registered = false
	s.Metrics.Exits.WithLabelValues("lost").Inc()
	if in.expectExit == id || in.State == orchestrator.StateStopping {
		s.Log.Info("map container lost while it was being stopped", "instance", in.ID, "reason", reason)
		return
	}
	s.Log.Warn("map container lost", "instance", in.ID, "container", shortID(id), "reason", reason)
	in.avoid = in.ports.Node
	s.failed(in, reason)
}

func exitKind(code int, oom bool) string {
	switch {
	case oom:
		return "oom"
	case code == 0:
		return "clean"
	default:
		return "crash"
	}
}

// resync compares the deployment's containers with the supervisor's records, for
// everything the events stream may have missed: containers that exited or vanished.
func (s *Supervisor) resync(ctx context.Context) error {
	// The list speaks only for containers recorded before it was taken: one started
	// meanwhile is simply not in it yet.
	s.mu.Lock()
	known := make(map[string]bool, len(s.instances)+len(s.pool))
	for _, in := range s.instances {
		known[in.ContainerID] = true
	}
	for _, m := range s.pool {
		known[m.containerID] = true
	}
	s.mu.Unlock()
	list, err := s.Runtime.List(ctx)
	if err != nil {
		return err
	}
	byID := make(map[string]Container, len(list))
	for _, c := range list {
		byID[c.ID] = c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	gone := func(id string) (Exit, bool) {
		c, ok := byID[id]
		switch {
		case !known[id]:
			return Exit{}, false
		case !ok:
			return Exit{Code: -1}, true
		}
		return c.Exit, !c.Running
	}
	for _, in := range s.instances {
		if in.busy || in.ContainerID == "" {
			continue
		}
		switch in.State {
		case orchestrator.StateReady, orchestrator.StateStarting, orchestrator.StateRestarting:
			if exit, ok := gone(in.ContainerID); ok {
				s.exited(in.ContainerID, exit, "resync")
			}
		}
	}
	for _, m := range s.pool {
		if !m.started {
			continue
		}
		if exit, ok := gone(m.containerID); ok {
			s.exited(m.containerID, exit, "resync")
		}
	}
	return nil
}
