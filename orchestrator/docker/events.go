package docker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/mapyard/mapyard/orchestrator"
)

// watchEvents follows Docker's events stream for the deployment's map containers until
// ctx ends. Every (re)connection is followed by a resync from ContainerList, because
// events sent while the stream was down are lost: a container that died meanwhile is
// found by its state instead.
func (s *Supervisor) watchEvents(ctx context.Context) {
	for delay := 100 * time.Millisecond; ctx.Err() == nil; delay = min(2*delay, 5*time.Second) {
		sub, cancel := context.WithCancel(ctx)
		msgs, errs := s.API.Events(sub, events.ListOptions{Filters: filters.NewArgs(
			filters.Arg("type", string(events.ContainerEventType)),
			filters.Arg("label", orchestrator.LabelManaged+"=true"),
			filters.Arg("label", orchestrator.LabelDeployment+"="+s.Spec.Deployment),
		)})
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
					s.Log.Warn("docker events stream ended; reconnecting", "err", err)
					s.Metrics.EventsReconnects.Inc()
				}
				break loop
			case m := <-msgs:
				s.handleEvent(m)
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

// handleEvent applies one container event: die (with its exit code), oom, and
// health_status changes reported by the image's HEALTHCHECK.
func (s *Supervisor) handleEvent(m events.Message) {
	action := string(m.Action)
	switch {
	case action == "oom":
		s.mu.Lock()
		s.oom[m.Actor.ID] = true
		s.mu.Unlock()
	case action == "die":
		code, err := strconv.Atoi(m.Actor.Attributes["exitCode"])
		if err != nil {
			code = -1
		}
		s.mu.Lock()
		oom := s.oom[m.Actor.ID]
		delete(s.oom, m.Actor.ID)
		s.exited(m.Actor.ID, code, oom, "die event")
		s.mu.Unlock()
	case strings.HasPrefix(action, "health_status") && strings.HasSuffix(action, "unhealthy"):
		s.mu.Lock()
		if in := s.byContainerLocked(m.Actor.ID); in != nil && in.State == orchestrator.StateReady {
			s.unhealthy(in, "docker health check reports unhealthy")
		}
		s.mu.Unlock()
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
func (s *Supervisor) exited(id string, code int, oom bool, source string) {
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
		s.transition(in, orchestrator.StateStopped, "exited cleanly with code 0 (not a crash)")
		in.ContainerID, in.GamePort, in.ControlPort = "", 0, 0
		if in.ID == s.DefaultInstanceID {
			s.spawn(in, orchestrator.StateStarting, "the default map is always wanted")
		}
	default:
		s.failed(in, fmt.Sprintf("container exited with code %d", code))
	}
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
	list, err := ListMaps(ctx, s.API, s.Spec.Deployment)
	if err != nil {
		return err
	}
	running := make(map[string]bool, len(list))
	for _, c := range list {
		if c.State == "running" {
			running[c.ID] = true
		}
	}
	var gone []string
	s.mu.Lock()
	for _, in := range s.instances {
		if in.busy || in.ContainerID == "" || running[in.ContainerID] {
			continue
		}
		switch in.State {
		case orchestrator.StateReady, orchestrator.StateStarting, orchestrator.StateRestarting:
			gone = append(gone, in.ContainerID)
		}
	}
	for _, m := range s.pool {
		if m.started && !running[m.containerID] {
			gone = append(gone, m.containerID)
		}
	}
	s.mu.Unlock()

	for _, id := range gone {
		code, oom := -1, false
		if info, err := s.API.ContainerInspect(ctx, id); err == nil && info.State != nil {
			if info.State.Running {
				continue
			}
			code, oom = info.State.ExitCode, info.State.OOMKilled
		}
		s.mu.Lock()
		s.exited(id, code, oom, "resync")
		s.mu.Unlock()
	}
	return nil
}
