// Package docker is the supervisor's runtime on a Docker engine: it runs mapyard's map
// instances as containers through the Docker Engine API and owns everything
// Docker-specific about them (names, labels, the deployment scope, published ports,
// the events stream). Containers are owned by label: the orchestrator finds its
// containers by io.mapyard.managed=true and its deployment, never by name alone, so a
// restarted orchestrator can find, adopt or remove what an earlier one started.
package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/nat"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/mapyard/mapyard/orchestrator/keys"
	"github.com/mapyard/mapyard/orchestrator/supervise"
)

// Ports a map server listens on inside its container. They are fixed because every
// container has its own network namespace; the host side is an ephemeral port on
// 127.0.0.1 that the orchestrator reads back from ContainerInspect.
const (
	MapGamePort    = 7000
	MapControlPort = 9100
)

// What every map container runs with, on one engine or as a Swarm service: a
// non-root user, and rotated json-file logs. OrchestratorHost is the name a map
// reaches the orchestrator's control listener by (MAP_ORCH_URL), pointed at the map
// network's gateway.
const (
	MapUser          = "10001:10001"
	LogDriver        = "json-file"
	OrchestratorHost = "host.docker.internal"
)

// LogOptions are the json-file options of every map container: 3 files of 10 MB.
func LogOptions() map[string]string { return map[string]string{"max-size": "10m", "max-file": "3"} }

// API is the part of *client.Client the runtime uses: the container lifecycle, the
// events stream, and an image's inspection (to tell a missing image from any other
// failed create). Tests wrap a real client; nothing else does.
type API interface {
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, containerID string, options container.StartOptions) error
	ContainerStop(ctx context.Context, containerID string, options container.StopOptions) error
	ContainerRemove(ctx context.Context, containerID string, options container.RemoveOptions) error
	ContainerRename(ctx context.Context, containerID, newContainerName string) error
	ContainerInspect(ctx context.Context, containerID string) (container.InspectResponse, error)
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	Events(ctx context.Context, options events.ListOptions) (<-chan events.Message, <-chan error)
	ImageInspect(ctx context.Context, imageID string, inspectOpts ...client.ImageInspectOption) (image.InspectResponse, error)
}

// Template is what every map container of a deployment shares. The image is not part
// of it: each map names its own (supervise.Spec.Image).
type Template struct {
	Deployment string // value of the io.mapyard.deployment label
	Network    string
	Gateway    string // IP of Network's gateway, where the control listener also binds
	MemoryMB   int
	NanoCPUs   int64
	PidsLimit  int64
}

// Runtime runs map containers on a Docker engine: the supervisor's runtime.
type Runtime struct {
	API      API
	Template Template
}

var _ supervise.Runtime = (*Runtime)(nil)

// NewRuntime returns a Runtime creating containers from t through api.
func NewRuntime(api API, t Template) *Runtime { return &Runtime{API: api, Template: t} }

// ErrNameTaken is why a map does not start when the container name it needs is held by
// a container this deployment does not own (another deployment's map, or anything
// else): that container is left alone, whatever its name.
var ErrNameTaken = errors.New("container name taken by a container this deployment does not own")

// Start removes a stale container of this deployment holding the instance's name, then
// creates and starts the container of spec and reads back its published ports. A name
// held by a container of anyone else is ErrNameTaken, and nothing is removed.
func (r *Runtime) Start(ctx context.Context, spec supervise.Spec) (supervise.Container, error) {
	name := r.specName(spec)
	if err := r.clearName(ctx, name, ""); err != nil {
		return supervise.Container{}, err
	}
	id, err := r.create(ctx, spec)
	if err != nil {
		return supervise.Container{}, err
	}
	if err := r.start(ctx, id); err != nil {
		_ = r.remove(context.WithoutCancel(ctx), id)
		return supervise.Container{}, err
	}
	info, err := r.API.ContainerInspect(ctx, id)
	if err != nil {
		return supervise.Container{}, fmt.Errorf("inspect container %s: %w", shortID(id), err)
	}
	ports, err := r.ports(info.NetworkSettings)
	if err != nil {
		return supervise.Container{}, fmt.Errorf("container %s: %w", shortID(id), err)
	}
	return supervise.Container{ID: id, Name: name, InstanceID: spec.InstanceID, Pool: spec.Pool, Successor: spec.Successor, Image: spec.Image, Running: true, Exit: supervise.Exit{Code: -1}, Ports: ports,
		Identity: keys.Identity{InstanceID: spec.InstanceID, Generation: spec.Generation}, KeyID: spec.KeyID}, nil
}

// create creates (without starting) the container of spec and returns its id. The
// container is locked down: read-only root file system, every capability dropped,
// no-new-privileges, a non-root user, resource limits, rotated json-file logs, and
// ports published on 127.0.0.1 only. Docker's restart policy is "no" because the
// orchestrator owns restarts (with backoff and quarantine). An image the engine does
// not have is supervise.ErrImageMissing: the engine is never asked to pull one, since
// a host runs what it built or loaded (no registry is needed, and none is trusted).
func (r *Runtime) create(ctx context.Context, s supervise.Spec) (string, error) {
	t := r.Template
	game := nat.Port(strconv.Itoa(MapGamePort) + "/tcp")
	ctrl := nat.Port(strconv.Itoa(MapControlPort) + "/tcp")
	loopback := []nat.PortBinding{{HostIP: "127.0.0.1", HostPort: "0"}}
	pids := t.PidsLimit
	cfg := &container.Config{
		Image:        s.Image,
		User:         MapUser,
		Env:          s.Env,
		ExposedPorts: nat.PortSet{game: {}, ctrl: {}},
		Labels:       Labels(t.Deployment, s),
		StopSignal:   "SIGTERM",
	}
	host := &container.HostConfig{
		PortBindings:   nat.PortMap{game: loopback, ctrl: loopback},
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyDisabled},
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges:true"},
		ExtraHosts:     []string{OrchestratorHost + ":" + t.Gateway},
		LogConfig:      container.LogConfig{Type: LogDriver, Config: LogOptions()},
		Resources: container.Resources{
			Memory:    int64(t.MemoryMB) << 20,
			NanoCPUs:  t.NanoCPUs,
			PidsLimit: &pids,
		},
	}
	netcfg := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{t.Network: {}}}
	name := r.specName(s)
	created, err := r.API.ContainerCreate(ctx, cfg, host, netcfg, nil, name)
	if errdefs.IsConflict(err) {
		// Taken between clearName and here: never removed, whoever holds it.
		return "", fmt.Errorf("create container %q: %w: %w", name, ErrNameTaken, err)
	}
	if errdefs.IsNotFound(err) && r.imageMissing(ctx, s.Image) {
		return "", fmt.Errorf("create container %q: image %q: %w: %w", name, s.Image, supervise.ErrImageMissing, err)
	}
	if err != nil {
		return "", fmt.Errorf("create container %q: %w", name, err)
	}
	return created.ID, nil
}

// imageMissing reports whether the engine says it has no image ref. A create answers
// "not found" for a missing image and for a missing network alike; asking for the image
// tells them apart, and any other answer is not a missing image.
func (r *Runtime) imageMissing(ctx context.Context, ref string) bool {
	_, err := r.API.ImageInspect(ctx, ref)
	return errdefs.IsNotFound(err)
}

// start starts a created container.
func (r *Runtime) start(ctx context.Context, id string) error {
	if err := r.API.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return fmt.Errorf("start container %s: %w", shortID(id), err)
	}
	return nil
}

// specName is the container name of spec in this deployment: the instance's, or a pool
// container's.
func (r *Runtime) specName(s supervise.Spec) string {
	if s.Pool {
		return PoolContainerName(r.Template.Deployment, s.InstanceID)
	}
	if s.Successor {
		return SuccessorName(r.Template.Deployment, s.InstanceID)
	}
	return ContainerName(r.Template.Deployment, s.InstanceID)
}

// clearName makes name free for a container of this deployment: a container of this
// deployment holding it (other than keep) is removed; one of anyone else is
// ErrNameTaken, with a message that says whose it is, and is left alone.
func (r *Runtime) clearName(ctx context.Context, name, keep string) error {
	info, err := r.API.ContainerInspect(ctx, name)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect container %q: %w", name, err)
	}
	if info.ContainerJSONBase == nil || info.ID == keep {
		return nil
	}
	if err := r.foreign(info); err != nil {
		return fmt.Errorf("container name %q is held by container %s: %w: %w; remove or rename it, or give this kit another ORCH_DEPLOYMENT",
			name, shortID(info.ID), ErrNameTaken, err)
	}
	return r.remove(ctx, info.ID)
}

// ErrNotOwned is why a container this deployment does not own is not stopped or removed.
var ErrNotOwned = errors.New("container not owned by this deployment")

// foreign returns ErrNotOwned, saying whose it is, for an inspected container this
// deployment does not own, and nil for one of its own.
func (r *Runtime) foreign(info container.InspectResponse) error {
	if info.ContainerJSONBase == nil {
		return nil
	}
	var labels map[string]string
	if info.Config != nil {
		labels = info.Config.Labels
	}
	if Owns(r.Template.Deployment, labels) {
		return nil
	}
	return fmt.Errorf("it is %s, not a map of deployment %q; left alone: %w", OwnerOf(labels), r.Template.Deployment, ErrNotOwned)
}

// OwnerOf says in words whose a container (or Swarm service) is, from its labels, for
// error messages.
func OwnerOf(labels map[string]string) string {
	switch {
	case labels[LabelManaged] != "true":
		return "not a mapyard map"
	case labels[LabelDeployment] == "":
		return "a mapyard map of no deployment"
	default:
		return fmt.Sprintf("a map of deployment %q", labels[LabelDeployment])
	}
}

// List returns every map container (running or not) of the deployment. A container's
// instance is the one its name says (a handed-out pool container is renamed to it; a
// blank one reports its pool id); exited containers are inspected for their exit code.
func (r *Runtime) List(ctx context.Context) ([]supervise.Container, error) {
	list, err := r.API.ContainerList(ctx, container.ListOptions{
		All: true,
		Filters: filters.NewArgs(
			filters.Arg("label", LabelManaged+"=true"),
			filters.Arg("label", LabelDeployment+"="+r.Template.Deployment),
		),
	})
	if err != nil {
		return nil, fmt.Errorf("list map containers of deployment %q: %w", r.Template.Deployment, err)
	}
	out := make([]supervise.Container, 0, len(list))
	for _, s := range list {
		c := supervise.Container{ID: s.ID, Pool: s.Labels[LabelPool] != "", Image: imageOf(s), Running: s.State == "running", Exit: supervise.Exit{Code: -1},
			Identity: Identity(s.Labels), KeyID: s.Labels[LabelKeyID]}
		if len(s.Names) > 0 {
			c.Name = strings.TrimPrefix(s.Names[0], "/")
			c.Successor = strings.HasSuffix(c.Name, successorSuffix)
			var ok bool
			if c.InstanceID, ok = InstanceFromContainerName(r.Template.Deployment, s.Names[0]); !ok {
				c.InstanceID, _ = poolFromContainerName(r.Template.Deployment, s.Names[0])
			}
		}
		if s.NetworkSettings != nil {
			if ep := s.NetworkSettings.Networks[r.Template.Network]; ep != nil {
				c.Ports.GameAddr = gameAddr(ep.IPAddress)
			}
		}
		for _, p := range s.Ports {
			if p.IP != "127.0.0.1" || p.Type != "tcp" {
				continue
			}
			switch p.PrivatePort {
			case MapGamePort:
				c.Ports.Game = int(p.PublicPort)
			case MapControlPort:
				c.Ports.Control = int(p.PublicPort)
			}
		}
		if !c.Running {
			if info, err := r.API.ContainerInspect(ctx, s.ID); err == nil && info.ContainerJSONBase != nil && info.State != nil {
				c.Running = info.State.Running // it may have started since the list
				c.Exit = supervise.Exit{Code: info.State.ExitCode, OOM: info.State.OOMKilled}
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// Stop stops a container of this deployment cleanly (one of anyone else is ErrNotOwned,
// left running): SIGTERM, then SIGKILL once grace has passed. A
// container that is gone or already stopped counts as stopped. The exit is read back
// from the engine (Code -1 when the container is gone).
func (r *Runtime) Stop(ctx context.Context, id string, grace time.Duration) (supervise.Exit, error) {
	if info, err := r.API.ContainerInspect(ctx, id); err == nil {
		if err := r.foreign(info); err != nil {
			return supervise.Exit{Code: -1}, fmt.Errorf("stop container %s: %w", shortID(id), err)
		}
	}
	secs := int((grace + time.Second - 1) / time.Second)
	err := r.API.ContainerStop(ctx, id, container.StopOptions{Timeout: &secs})
	if err != nil && !errdefs.IsNotFound(err) && !errdefs.IsNotModified(err) {
		return supervise.Exit{Code: -1}, fmt.Errorf("stop container %s: %w", shortID(id), err)
	}
	info, err := r.API.ContainerInspect(ctx, id)
	if err != nil || info.ContainerJSONBase == nil || info.State == nil {
		return supervise.Exit{Code: -1}, nil
	}
	return supervise.Exit{Code: info.State.ExitCode, OOM: info.State.OOMKilled}, nil
}

// Remove force-removes a container of this deployment. A container that is already
// gone is not an error; one this deployment does not own is an error and is left alone
// (the supervisor names only containers it listed or started, so this guards the rule
// where it is kept rather than a known path).
func (r *Runtime) Remove(ctx context.Context, id string) error {
	info, err := r.API.ContainerInspect(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect container %s: %w", shortID(id), err)
	}
	if err := r.foreign(info); err != nil {
		return fmt.Errorf("remove container %s: %w", shortID(id), err)
	}
	return r.remove(ctx, info.ID)
}

// remove force-removes a container known to be this deployment's.
func (r *Runtime) remove(ctx context.Context, id string) error {
	err := r.API.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
	if err != nil && !errdefs.IsNotFound(err) && !errdefs.IsConflict(err) {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	return nil
}

// Assign renames a handed-out pool container to the instance's container name, after
// removing a stale container of this deployment that held that name (a name held by
// anyone else is ErrNameTaken). Labels cannot change after create, so the name is what
// says which instance a handed-out container runs (its labels name no instance, only
// the pool id its credentials were minted for).
func (r *Runtime) Assign(ctx context.Context, id, instanceID string) error {
	name := ContainerName(r.Template.Deployment, instanceID)
	if err := r.clearName(ctx, name, id); err != nil {
		return err
	}
	if err := r.API.ContainerRename(ctx, id, name); err != nil {
		return fmt.Errorf("rename container %s to %q: %w", shortID(id), name, err)
	}
	return nil
}

// imageOf is the image a listed container was created from: its label, or, for
// containers of versions before the label, the reference the engine reports (which is
// the one the create named unless the image was since removed or retagged).
func imageOf(s container.Summary) string {
	if img := s.Labels[LabelImage]; img != "" {
		return img
	}
	if strings.HasPrefix(s.Image, "sha256:") {
		return ""
	}
	return s.Image
}

// Identity is whose credentials a map container (or Swarm service) holds, from its
// labels: the instance it was created for, else its pool id (in LabelInstance on
// containers of versions before pool ids had a label of their own), and the
// generation.
func Identity(labels map[string]string) keys.Identity {
	id := labels[LabelInstance]
	if id == "" && labels[LabelPool] != "true" {
		id = labels[LabelPool]
	}
	return keys.Identity{InstanceID: id, Generation: labels[LabelGeneration]}
}

// ports reads the host ports (on 127.0.0.1) of a map container's game and control
// ports, and its game listener's address on the map network.
func (r *Runtime) ports(ns *container.NetworkSettings) (supervise.Ports, error) {
	if ns == nil {
		return supervise.Ports{}, errors.New("container has no network settings")
	}
	port := func(p int) (int, error) {
		for _, b := range ns.Ports[nat.Port(strconv.Itoa(p)+"/tcp")] {
			if b.HostIP == "127.0.0.1" {
				return strconv.Atoi(b.HostPort)
			}
		}
		return 0, fmt.Errorf("port %d/tcp is not published on 127.0.0.1", p)
	}
	var ports supervise.Ports
	var err error
	if ports.Game, err = port(MapGamePort); err != nil {
		return supervise.Ports{}, err
	}
	if ports.Control, err = port(MapControlPort); err != nil {
		return supervise.Ports{}, err
	}
	if ep := ns.Networks[r.Template.Network]; ep != nil {
		ports.GameAddr = gameAddr(ep.IPAddress)
	}
	return ports, nil
}

// gameAddr is the game listener at a container's address on the map network, or ""
// without one.
func gameAddr(ip string) string {
	if ip == "" {
		return ""
	}
	return net.JoinHostPort(ip, strconv.Itoa(MapGamePort))
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
