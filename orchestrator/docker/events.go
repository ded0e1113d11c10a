package docker

import (
	"context"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/mapyard/mapyard/orchestrator/supervise"
)

// Events follows Docker's events stream for the deployment's map containers and
// translates it: a die (with its exit code, and whether an oom event came first) is
// EventExited; a health_status change to unhealthy (the image's HEALTHCHECK) is
// EventUnhealthy; everything else is dropped. The stream ends with an error on the
// second channel when Docker's does; the caller reconnects.
func (r *Runtime) Events(ctx context.Context) (<-chan supervise.Event, <-chan error) {
	return FollowEvents(ctx, r.API, r.Template.Deployment, func(m events.Message) string { return m.Actor.ID })
}

// EventsAPI is the part of *client.Client FollowEvents uses.
type EventsAPI interface {
	Events(ctx context.Context, options events.ListOptions) (<-chan events.Message, <-chan error)
}

// FollowEvents is Runtime.Events for any runtime whose map containers carry the
// deployment's labels: idOf says which runtime object (a container, a Swarm service)
// an engine event of a container is about, "" for none.
func FollowEvents(ctx context.Context, api EventsAPI, deployment string, idOf func(events.Message) string) (<-chan supervise.Event, <-chan error) {
	msgs, errs := api.Events(ctx, events.ListOptions{Filters: filters.NewArgs(
		filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("label", LabelManaged+"=true"),
		filters.Arg("label", LabelDeployment+"="+deployment),
	)})
	out, outErr := make(chan supervise.Event), make(chan error, 1)
	go func() {
		oom := map[string]bool{} // containers with an oom event not yet followed by die
		for {
			var m events.Message
			select {
			case <-ctx.Done():
				return
			case err := <-errs:
				outErr <- err
				return
			case m = <-msgs:
			}
			e, ok := translate(m, oom)
			if e.ContainerID = idOf(m); !ok || e.ContainerID == "" {
				continue
			}
			select {
			case out <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, outErr
}

// translate turns one Docker event into a supervisor event, remembering oom events
// until the container's die.
func translate(m events.Message, oom map[string]bool) (supervise.Event, bool) {
	action := string(m.Action)
	switch {
	case action == "oom":
		oom[m.Actor.ID] = true
	case action == "die":
		code, err := strconv.Atoi(m.Actor.Attributes["exitCode"])
		if err != nil {
			code = -1
		}
		killed := oom[m.Actor.ID]
		delete(oom, m.Actor.ID)
		return supervise.Event{ContainerID: m.Actor.ID, Kind: supervise.EventExited, Exit: supervise.Exit{Code: code, OOM: killed}}, true
	case strings.HasPrefix(action, "health_status") && strings.HasSuffix(action, "unhealthy"):
		return supervise.Event{ContainerID: m.Actor.ID, Kind: supervise.EventUnhealthy}, true
	}
	return supervise.Event{}, false
}
