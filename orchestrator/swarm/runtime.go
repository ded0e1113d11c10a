// Package swarm is the supervisor's runtime on Docker Swarm mode: each map instance is
// a Swarm service of one replica, placed by the Swarm's scheduler, through the same
// Docker Engine API as package docker. Swarm's own restart policy is none: the
// supervisor keeps deciding restarts, backoff and quarantine, as on one engine.
//
// Services are owned by label, exactly as package docker owns containers (the same
// labels, on the service and on its task's container), so a restarted orchestrator
// lists and adopts what an earlier one started. A service cannot be renamed, so its
// name is never read back: it is unique per start (mapyard-<id>-<hex>), and which
// instance a service runs is its LabelRuns label, which Assign updates in place (a
// change to a service's labels does not touch its task).
//
// Networking: every map service is attached to one attachable overlay network and
// publishes no port on any host (endpoint mode dnsrr: no virtual IP either). The
// orchestrator and the edge run as containers on the same overlay (compose/stack.yaml)
// and reach a map at its task's address there, on the map's own ports; maps reach the
// orchestrator by its name on the overlay (ORCH_SWARM_SELF). docs/scale-out.md says
// what isolation that gives and what it does not.
package swarm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/supervise"
)

// Service labels besides package docker's container labels.
const (
	// LabelRuns names the instance a service runs now: the instance it was created
	// for, or, for a handed-out pool service or a live upgrade's successor, the one
	// Assign gave it. A blank pool service has none. (LabelInstance keeps naming whose
	// credentials the service holds, as on containers.)
	LabelRuns = "io.mapyard.runs"
	// LabelSuccessor marks a live upgrade's next service of an instance until Assign.
	LabelSuccessor = "io.mapyard.successor"
)

// API is the part of *client.Client the runtime uses: services, their tasks, the
// Swarm's nodes, and the local engine's containers (to kill a task's container that
// runs on this node when its service is removed).
type API interface {
	ServiceCreate(ctx context.Context, service swarm.ServiceSpec, options swarm.ServiceCreateOptions) (swarm.ServiceCreateResponse, error)
	ServiceInspectWithRaw(ctx context.Context, serviceID string, opts swarm.ServiceInspectOptions) (swarm.Service, []byte, error)
	ServiceUpdate(ctx context.Context, serviceID string, version swarm.Version, service swarm.ServiceSpec, options swarm.ServiceUpdateOptions) (swarm.ServiceUpdateResponse, error)
	ServiceRemove(ctx context.Context, serviceID string) error
	ServiceList(ctx context.Context, options swarm.ServiceListOptions) ([]swarm.Service, error)
	TaskList(ctx context.Context, options swarm.TaskListOptions) ([]swarm.Task, error)
	ContainerRemove(ctx context.Context, containerID string, options container.RemoveOptions) error
	NodeList(ctx context.Context, options swarm.NodeListOptions) ([]swarm.Node, error)
	NodeInspectWithRaw(ctx context.Context, nodeID string) (swarm.Node, []byte, error)
}

// Template is what every map service of a deployment shares.
type Template struct {
	Deployment string // value of the io.mapyard.deployment label
	Network    string // the overlay network of maps (EnsureNetwork)
	MemoryMB   int
	NanoCPUs   int64
	PidsLimit  int64
	// Constraints are Swarm placement constraints every map service gets, such as
	// node.labels.mapyard.maps==true.
	Constraints []string
	// ImageConstraints are more constraints for the services of one image (so of the
	// templates that name it), by image as the spec names it.
	ImageConstraints map[string][]string
	// Reach says the runtime runs on the maps' overlay network (the orchestrator in its
	// container), so it can dial a map to tell a lost one from a slow one.
	Reach bool
	// StopGrace is every service's stop grace period: Swarm sends SIGTERM, then
	// SIGKILL once it has passed. A task keeps the grace of the spec it was created
	// with, so Stop cannot change it per call.
	StopGrace time.Duration
}

// Runtime runs map instances as Swarm services: the supervisor's runtime. A
// supervise.Container's ID is its service's id.
type Runtime struct {
	API      API
	Template Template
	// Poll is how often Start, Stop and Remove look at a service's task.
	Poll time.Duration
	// EventPoll is how often Events looks at every task and node (DefaultEventPoll).
	EventPoll time.Duration
}

var (
	_ supervise.Runtime = (*Runtime)(nil)
	_ supervise.Nodes   = (*Runtime)(nil)
)

// DefaultPoll is Runtime.Poll's default.
const DefaultPoll = 50 * time.Millisecond

// NewRuntime returns a Runtime creating services from t through api.
func NewRuntime(api API, t Template) *Runtime {
	return &Runtime{API: api, Template: t, Poll: DefaultPoll, EventPoll: DefaultEventPoll}
}

// Start creates the service of spec and waits until its task runs, then reads back
// its task's address on the overlay network. A task no node can take is
// supervise.ErrUnschedulable, with the Swarm's reason and the constraints. A node that
// rejects the task for want of its image is left out and the service created again
// elsewhere, until no node is left: then it is supervise.ErrImageMissing, so a map goes
// to the nodes that hold its image and is image_missing only where none does. A spec
// that avoids a node (spec.Avoid) is placed elsewhere, or, where no other node can take
// it, there after all. On any failure the service is removed.
func (r *Runtime) Start(ctx context.Context, spec supervise.Spec) (supervise.Container, error) {
	var lacking []string // nodes whose engine has not the image
	var missing error
	for {
		c, err := r.start(ctx, spec, lacking)
		var nl *nodeLacksImage
		switch {
		case errors.As(err, &nl) && nl.node != "" && !slices.Contains(lacking, nl.node) && len(lacking) < maxNodesTried:
			missing, lacking = err, append(lacking, nl.node)
			continue
		case errors.Is(err, supervise.ErrUnschedulable) && spec.Avoid != "":
			spec.Avoid = "" // no other node can take it: the avoided one may
			continue
		case errors.Is(err, supervise.ErrUnschedulable) && missing != nil:
			return supervise.Container{}, missing // the nodes that could run it lack its image
		}
		return c, err
	}
}

// maxNodesTried bounds how many nodes lacking a map's image one Start tries.
const maxNodesTried = 16

// nodeLacksImage is a task rejected by its node for want of its image.
type nodeLacksImage struct {
	node string
	err  error
}

func (e *nodeLacksImage) Error() string { return e.err.Error() }
func (e *nodeLacksImage) Unwrap() error { return e.err }

// start is Start of one service, kept off the nodes in exclude.
func (r *Runtime) start(ctx context.Context, spec supervise.Spec, exclude []string) (supervise.Container, error) {
	name, err := serviceName(spec)
	if err != nil {
		return supervise.Container{}, err
	}
	created, err := r.API.ServiceCreate(ctx, r.serviceSpec(name, spec, exclude), swarm.ServiceCreateOptions{})
	if err != nil {
		return supervise.Container{}, fmt.Errorf("create service %q: %w", name, err)
	}
	task, err := r.waitRunning(ctx, created.ID, spec, exclude)
	if err != nil {
		_ = r.API.ServiceRemove(context.WithoutCancel(ctx), created.ID)
		return supervise.Container{}, fmt.Errorf("start service %q: %w", name, err)
	}
	c := supervise.Container{ID: created.ID, Name: name, InstanceID: spec.InstanceID, Pool: spec.Pool, Successor: spec.Successor, Image: spec.Image,
		Identity: docker.Identity(docker.Labels(r.Template.Deployment, spec)), KeyID: spec.KeyID}
	r.state(&c, task)
	if c.Ports.Host == "" {
		_ = r.API.ServiceRemove(context.WithoutCancel(ctx), created.ID)
		return supervise.Container{}, fmt.Errorf("service %q: its task runs without an address on network %q", name, r.Template.Network)
	}
	return c, nil
}

// serviceSpec is the service of spec: one replica, no restarts, the map containers'
// labels and hardening, on the overlay network with no port published.
func (r *Runtime) serviceSpec(name string, s supervise.Spec, exclude []string) swarm.ServiceSpec {
	t := r.Template
	labels := docker.Labels(t.Deployment, s)
	svcLabels := map[string]string{}
	for k, v := range labels {
		svcLabels[k] = v
	}
	switch {
	case s.Successor:
		svcLabels[LabelSuccessor] = "true"
	case !s.Pool:
		svcLabels[LabelRuns] = s.InstanceID
	}
	one := uint64(1)
	grace := t.StopGrace
	return swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: name, Labels: svcLabels},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: &swarm.ContainerSpec{
				Image:           s.Image,
				Labels:          labels,
				Env:             s.Env,
				User:            docker.MapUser,
				ReadOnly:        true,
				CapabilityDrop:  []string{"ALL"},
				Privileges:      &swarm.Privileges{NoNewPrivileges: true},
				StopSignal:      "SIGTERM",
				StopGracePeriod: &grace,
				// No health check of Swarm's own: Swarm holds a task with one in
				// "starting" until its first check passes (the map image's: 5 s), so
				// every start and every restart would wait for it, and it would kill
				// an unhealthy task behind the supervisor's back. The supervisor probes
				// /health itself, over the overlay, and decides.
				Healthcheck: &container.HealthConfig{Test: []string{"NONE"}},
			},
			Resources: &swarm.ResourceRequirements{Limits: &swarm.Limit{
				NanoCPUs: t.NanoCPUs, MemoryBytes: int64(t.MemoryMB) << 20, Pids: t.PidsLimit,
			}},
			RestartPolicy: &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionNone},
			Placement:     &swarm.Placement{Constraints: r.constraints(s, exclude)},
			Networks:      []swarm.NetworkAttachmentConfig{{Target: t.Network}},
			LogDriver:     &swarm.Driver{Name: docker.LogDriver, Options: docker.LogOptions()},
		},
		Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &one}},
		EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeDNSRR},
	}
}

// constraints are the placement constraints of the service of s: the deployment's,
// its image's, its node when the warm pool pins a spare to one, and none of the nodes
// it avoids or excludes.
func (r *Runtime) constraints(s supervise.Spec, exclude []string) []string {
	out := append(slices.Clone(r.Template.Constraints), r.Template.ImageConstraints[s.Image]...)
	if s.Node != "" {
		out = append(out, "node.id=="+s.Node)
	}
	if s.Avoid != "" {
		out = append(out, "node.id!="+s.Avoid)
	}
	for _, n := range exclude {
		out = append(out, "node.id!="+n)
	}
	return out
}

// waitRunning waits until the service's task runs and returns it.
func (r *Runtime) waitRunning(ctx context.Context, id string, spec supervise.Spec, exclude []string) (swarm.Task, error) {
	for {
		task, ok, err := r.task(ctx, id)
		if err != nil {
			return swarm.Task{}, err
		}
		if ok {
			st, msg := task.Status.State, task.Status.Err
			switch {
			case st == swarm.TaskStateRunning:
				return task, nil
			case strings.Contains(msg, "No such image"):
				return swarm.Task{}, &nodeLacksImage{node: task.NodeID, err: fmt.Errorf("image %q on node %s: %w: %s", spec.Image, shortID(task.NodeID), supervise.ErrImageMissing, msg)}
			case st == swarm.TaskStatePending && strings.Contains(msg, "no suitable node"):
				return swarm.Task{}, fmt.Errorf("%w: %s (constraints %q)", supervise.ErrUnschedulable, msg, r.constraints(spec, exclude))
			case terminal(st):
				return swarm.Task{}, fmt.Errorf("task %s: %s %s", task.ID, st, msg)
			}
		}
		select {
		case <-ctx.Done():
			return swarm.Task{}, fmt.Errorf("waiting for its task to run: %w", context.Cause(ctx))
		case <-time.After(r.Poll):
		}
	}
}

// task returns the newest task of service id (ok=false while it has none).
func (r *Runtime) task(ctx context.Context, id string) (swarm.Task, bool, error) {
	tasks, err := r.API.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", id))})
	if err != nil {
		return swarm.Task{}, false, fmt.Errorf("tasks of service %s: %w", shortID(id), err)
	}
	t, ok := newestTasks(tasks)[id]
	return t, ok, nil
}

// deploymentTasks returns the deployment's map services and their tasks, listed in
// one call for all of them (none when there is no service: a task list filtered by no
// service would be every task of the Swarm).
func (r *Runtime) deploymentTasks(ctx context.Context) ([]swarm.Service, []swarm.Task, error) {
	services, err := r.API.ServiceList(ctx, swarm.ServiceListOptions{Filters: filters.NewArgs(
		filters.Arg("label", docker.LabelManaged+"=true"),
		filters.Arg("label", docker.LabelDeployment+"="+r.Template.Deployment),
	)})
	if err != nil {
		return nil, nil, fmt.Errorf("list map services of deployment %q: %w", r.Template.Deployment, err)
	}
	if len(services) == 0 {
		return services, nil, nil
	}
	args := filters.NewArgs()
	for _, s := range services {
		args.Add("service", s.ID)
	}
	tasks, err := r.API.TaskList(ctx, swarm.TaskListOptions{Filters: args})
	if err != nil {
		return nil, nil, fmt.Errorf("tasks of the map services of deployment %q: %w", r.Template.Deployment, err)
	}
	return services, tasks, nil
}

// newestTasks is the newest of tasks of each service, by service id: the task a
// service's state is read from (an older one has been replaced).
func newestTasks(tasks []swarm.Task) map[string]swarm.Task {
	out := make(map[string]swarm.Task)
	for _, t := range tasks {
		if cur, ok := out[t.ServiceID]; !ok || t.CreatedAt.After(cur.CreatedAt) {
			out[t.ServiceID] = t
		}
	}
	return out
}

// terminal reports whether a task in st will never run again.
func terminal(st swarm.TaskState) bool {
	switch st {
	case swarm.TaskStateComplete, swarm.TaskStateShutdown, swarm.TaskStateFailed, swarm.TaskStateRejected, swarm.TaskStateRemove, swarm.TaskStateOrphaned:
		return true
	}
	return false
}

// state fills c's Running, Exit and Ports from its service's task: a running task's
// ports are its container's own, at its address on the maps' overlay network.
func (r *Runtime) state(c *supervise.Container, t swarm.Task) {
	c.Running, c.Exit = t.Status.State == swarm.TaskStateRunning, supervise.Exit{Code: -1}
	if cs := t.Status.ContainerStatus; cs != nil && terminal(t.Status.State) {
		c.Exit.Code = cs.ExitCode
	}
	c.Ports.Node = t.NodeID
	if !c.Running {
		return
	}
	ip := taskAddress(t, r.Template.Network)
	if ip == "" {
		return
	}
	c.Ports = supervise.Ports{Host: ip, Node: t.NodeID, Game: docker.MapGamePort, Control: docker.MapControlPort,
		GameAddr: net.JoinHostPort(ip, strconv.Itoa(docker.MapGamePort))}
}

// taskAddress is task t's IP address on the network named (or with the id) network,
// or "" when it has none yet.
func taskAddress(t swarm.Task, network string) string {
	for _, a := range t.NetworksAttachments {
		if a.Network.Spec.Annotations.Name != network && a.Network.ID != network {
			continue
		}
		for _, cidr := range a.Addresses {
			if p, err := netip.ParsePrefix(cidr); err == nil {
				return p.Addr().String()
			}
		}
	}
	return ""
}

// List returns every map service of the deployment with its task's state, the
// newest task of each, from one list of the services' tasks. The instance a service
// runs is its LabelRuns label (a blank pool service reports its pool id).
func (r *Runtime) List(ctx context.Context) ([]supervise.Container, error) {
	list, tasks, err := r.deploymentTasks(ctx)
	if err != nil {
		return nil, err
	}
	newest := newestTasks(tasks)
	out := make([]supervise.Container, 0, len(list))
	for _, svc := range list {
		l := svc.Spec.Labels
		c := supervise.Container{ID: svc.ID, Name: svc.Spec.Name, InstanceID: l[LabelRuns], Pool: l[docker.LabelPool] != "",
			Successor: l[LabelSuccessor] == "true", Image: l[docker.LabelImage], Identity: docker.Identity(l), KeyID: l[docker.LabelKeyID]}
		if c.InstanceID == "" && c.Pool {
			c.InstanceID = l[docker.LabelPool]
		}
		if c.Successor {
			c.InstanceID = l[docker.LabelInstance]
		}
		c.Exit = supervise.Exit{Code: -1}
		if task, ok := newest[svc.ID]; ok {
			r.state(&c, task)
		}
		out = append(out, c)
	}
	return out, nil
}

// Stop scales a service of this deployment to no replicas (one of anyone else is
// docker.ErrNotOwned): Swarm sends its task SIGTERM, then SIGKILL once the service's
// stop grace period (Template.StopGrace) has passed. It waits until the task has ended,
// up to grace and a little more, and returns how it ended; it stops waiting as soon as
// the task looks lost with its node (see gone), whose end no one would report. A
// service that is gone counts as stopped.
func (r *Runtime) Stop(ctx context.Context, id string, grace time.Duration) (supervise.Exit, error) {
	unknown := supervise.Exit{Code: -1}
	svc, err := r.owned(ctx, id)
	if errdefs.IsNotFound(err) {
		return unknown, nil
	}
	if err != nil {
		return unknown, fmt.Errorf("stop service %s: %w", shortID(id), err)
	}
	if m := svc.Spec.Mode.Replicated; m != nil && m.Replicas != nil && *m.Replicas > 0 {
		zero := uint64(0)
		m.Replicas = &zero
		_, err := r.API.ServiceUpdate(ctx, id, svc.Version, svc.Spec, swarm.ServiceUpdateOptions{})
		if errdefs.IsNotFound(err) {
			return unknown, nil
		}
		if err != nil {
			return unknown, fmt.Errorf("stop service %s: %w", shortID(id), err)
		}
	}
	wait, cancel := context.WithTimeout(ctx, max(grace, r.Template.StopGrace)+5*time.Second)
	defer cancel()
	var checked time.Time
	lost := 0
	for {
		task, ok, err := r.task(wait, id)
		if err != nil || !ok {
			return unknown, nil
		}
		if terminal(task.Status.State) {
			var c supervise.Container
			r.state(&c, task)
			return c.Exit, nil
		}
		if time.Since(checked) >= lostCheck {
			checked = time.Now()
			if r.gone(wait, task) {
				lost++
			} else {
				lost = 0
			}
			if lost >= 2 {
				// Its node cannot report the end: the service's removal ends the task
				// there, if the node ever comes back.
				return unknown, nil
			}
		}
		select {
		case <-wait.Done():
			return unknown, nil
		case <-time.After(r.Poll):
		}
	}
}

// lostCheck is how often Stop asks whether a stopping task's node is still there.
const lostCheck = 500 * time.Millisecond

// gone reports whether task t looks lost with its node: the manager reports the node
// down, or, where the runtime runs on the maps' overlay (Template.Reach), the map's
// control port does not even accept a connection (a map that is alive but hung still
// does: the kernel accepts for it). Swarm takes seconds to call a node down; a dial
// knows at once.
func (r *Runtime) gone(ctx context.Context, t swarm.Task) bool {
	if _, down := r.nodeDown(ctx, t); down {
		return true
	}
	ip := taskAddress(t, r.Template.Network)
	if !r.Template.Reach || ip == "" {
		return false
	}
	d := net.Dialer{Timeout: lostCheck}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(docker.MapControlPort)))
	if err != nil {
		return ctx.Err() == nil
	}
	c.Close()
	return false
}

// Remove removes a service of this deployment; a service that is already gone is not
// an error, one this deployment does not own is an error and is left alone. Its task's
// container is then removed at once when it is on this node; on another node Swarm
// stops it within the service's stop grace period.
func (r *Runtime) Remove(ctx context.Context, id string) error {
	if _, err := r.owned(ctx, id); errdefs.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("remove service %s: %w", shortID(id), err)
	}
	task, ok, err := r.task(ctx, id)
	if err != nil {
		return err
	}
	if err := r.API.ServiceRemove(ctx, id); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("remove service %s: %w", shortID(id), err)
	}
	if ok && task.Status.ContainerStatus != nil && task.Status.ContainerStatus.ContainerID != "" {
		err := r.API.ContainerRemove(ctx, task.Status.ContainerStatus.ContainerID, container.RemoveOptions{Force: true})
		if err != nil && !errdefs.IsNotFound(err) && !errdefs.IsConflict(err) {
			return fmt.Errorf("remove container of service %s: %w", shortID(id), err)
		}
	}
	return nil
}

// Assign records that service id now runs instanceID: its LabelRuns label is set and
// its successor mark dropped, by a service update that changes labels only, so its
// task keeps running untouched. (A service cannot be renamed; its name keeps the id it
// was started with.)
func (r *Runtime) Assign(ctx context.Context, id, instanceID string) error {
	svc, err := r.owned(ctx, id)
	if err != nil {
		return fmt.Errorf("assign service %s to %q: %w", shortID(id), instanceID, err)
	}
	svc.Spec.Labels[LabelRuns] = instanceID
	delete(svc.Spec.Labels, LabelSuccessor)
	if _, err := r.API.ServiceUpdate(ctx, id, svc.Version, svc.Spec, swarm.ServiceUpdateOptions{}); err != nil {
		return fmt.Errorf("assign service %s to %q: %w", shortID(id), instanceID, err)
	}
	return nil
}

// owned inspects service id and returns it when this deployment owns it, or an error
// wrapping docker.ErrNotOwned that says whose it is.
func (r *Runtime) owned(ctx context.Context, id string) (swarm.Service, error) {
	svc, _, err := r.API.ServiceInspectWithRaw(ctx, id, swarm.ServiceInspectOptions{})
	if err != nil {
		return swarm.Service{}, err
	}
	if !docker.Owns(r.Template.Deployment, svc.Spec.Labels) {
		return swarm.Service{}, fmt.Errorf("it is %s, not a map of deployment %q; left alone: %w",
			docker.OwnerOf(svc.Spec.Labels), r.Template.Deployment, docker.ErrNotOwned)
	}
	if svc.Spec.Labels == nil {
		svc.Spec.Labels = map[string]string{}
	}
	return svc, nil
}

// serviceName is a new service's name: mapyard-<id>-<hex>, at most 63 characters
// (Swarm's limit), unique per start because a service cannot be renamed and an
// instance's next service starts beside its current one.
func serviceName(s supervise.Spec) (string, error) {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	id := s.InstanceID
	const room = 63 - len("mapyard-") - len("-") - 6
	if len(id) > room {
		id = strings.TrimRight(id[:room], "-")
	}
	return "mapyard-" + id + "-" + hex.EncodeToString(b), nil
}

// ErrNotManager is why the Swarm runtime does not start on an engine that is not a
// Swarm manager.
var ErrNotManager = errors.New("the Docker engine is not a Swarm manager")

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
