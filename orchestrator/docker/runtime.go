// Package docker runs mapyard's map instances as Docker containers through the Docker
// Engine API. Containers are owned by label: the orchestrator finds its containers by
// io.mapyard.managed=true, never by name alone, so a restarted orchestrator can find,
// adopt or remove what an earlier one started.
package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/mapyard/mapyard/orchestrator"
)

// Ports a map server listens on inside its container. They are fixed because every
// container has its own network namespace; the host side is an ephemeral port on
// 127.0.0.1 that the orchestrator reads back from ContainerInspect.
const (
	MapGamePort    = 7000
	MapControlPort = 9100
)

// API is the part of *client.Client the supervisor uses: container lifecycle, the
// events stream and the map network. Tests wrap a real client; nothing else does.
type API interface {
	ContainerStop(ctx context.Context, containerID string, options container.StopOptions) error
	ContainerRename(ctx context.Context, containerID, newContainerName string) error
	Events(ctx context.Context, options events.ListOptions) (<-chan events.Message, <-chan error)
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, containerID string, options container.StartOptions) error
	ContainerInspect(ctx context.Context, containerID string) (container.InspectResponse, error)
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	ContainerRemove(ctx context.Context, containerID string, options container.RemoveOptions) error
	NetworkInspect(ctx context.Context, networkID string, options network.InspectOptions) (network.Inspect, error)
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
}

// MapSpec is everything needed to create one map container.
type MapSpec struct {
	// Name is the container name; empty means ContainerName(InstanceID).
	Name       string
	Deployment string // value of the io.mapyard.deployment label
	Pool       bool   // a blank warm-pool container
	InstanceID string
	MapID      string
	Image      string
	Network    string
	Gateway    string   // IP of Network's gateway, where the control listener also binds
	Env        []string // environment of the map server (orchestrator URL, secret, MAP_*)
	MemoryMB   int
	NanoCPUs   int64
	PidsLimit  int64
}

// EnsureNetwork returns the gateway IP of the user-defined bridge network name, creating
// the network (labelled as mapyard's) if it does not exist.
func EnsureNetwork(ctx context.Context, api API, name string) (gateway string, err error) {
	nw, err := api.NetworkInspect(ctx, name, network.InspectOptions{})
	if errdefs.IsNotFound(err) {
		if _, err := api.NetworkCreate(ctx, name, network.CreateOptions{
			Driver: "bridge",
			Labels: map[string]string{orchestrator.LabelManaged: "true"},
		}); err != nil && !errdefs.IsConflict(err) {
			return "", fmt.Errorf("create network %q: %w", name, err)
		}
		nw, err = api.NetworkInspect(ctx, name, network.InspectOptions{})
	}
	if err != nil {
		return "", fmt.Errorf("inspect network %q: %w", name, err)
	}
	for _, c := range nw.IPAM.Config {
		if ip := net.ParseIP(c.Gateway); ip != nil && ip.To4() != nil {
			return c.Gateway, nil
		}
	}
	return "", fmt.Errorf("network %q has no IPv4 gateway", name)
}

// CreateMap creates (without starting) the container of spec and returns its id. The container
// is locked down: read-only root file system, every capability dropped,
// no-new-privileges, a non-root user, resource limits, rotated json-file logs, and ports
// published on 127.0.0.1 only. Docker's restart policy is "no" because the orchestrator
// owns restarts (with backoff and quarantine).
func CreateMap(ctx context.Context, api API, s MapSpec) (string, error) {
	game := nat.Port(strconv.Itoa(MapGamePort) + "/tcp")
	ctrl := nat.Port(strconv.Itoa(MapControlPort) + "/tcp")
	loopback := []nat.PortBinding{{HostIP: "127.0.0.1", HostPort: "0"}}
	pids := s.PidsLimit
	cfg := &container.Config{
		Image:        s.Image,
		User:         "10001:10001",
		Env:          s.Env,
		ExposedPorts: nat.PortSet{game: {}, ctrl: {}},
		Labels: map[string]string{
			orchestrator.LabelManaged:    "true",
			orchestrator.LabelInstance:   s.InstanceID,
			orchestrator.LabelMap:        s.MapID,
			orchestrator.LabelDeployment: s.Deployment,
		},
		StopSignal: "SIGTERM",
	}
	host := &container.HostConfig{
		PortBindings:   nat.PortMap{game: loopback, ctrl: loopback},
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyDisabled},
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges:true"},
		ExtraHosts:     []string{"host.docker.internal:" + s.Gateway},
		LogConfig: container.LogConfig{
			Type:   "json-file",
			Config: map[string]string{"max-size": "10m", "max-file": "3"},
		},
		Resources: container.Resources{
			Memory:    int64(s.MemoryMB) << 20,
			NanoCPUs:  s.NanoCPUs,
			PidsLimit: &pids,
		},
	}
	if s.Pool {
		cfg.Labels[orchestrator.LabelPool] = "true"
	}
	netcfg := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{s.Network: {}}}
	name := s.Name
	if name == "" {
		name = orchestrator.ContainerName(s.InstanceID)
	}
	created, err := api.ContainerCreate(ctx, cfg, host, netcfg, nil, name)
	if err != nil {
		return "", fmt.Errorf("create container %q: %w", name, err)
	}
	return created.ID, nil
}

// StartMap starts a created map container.
func StartMap(ctx context.Context, api API, id string) error {
	if err := api.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return fmt.Errorf("start container %s: %w", shortID(id), err)
	}
	return nil
}

// ListMaps returns every map container (running or not) of a deployment.
func ListMaps(ctx context.Context, api API, deployment string) ([]container.Summary, error) {
	list, err := api.ContainerList(ctx, container.ListOptions{
		All: true,
		Filters: filters.NewArgs(
			filters.Arg("label", orchestrator.LabelManaged+"=true"),
			filters.Arg("label", orchestrator.LabelDeployment+"="+deployment),
		),
	})
	if err != nil {
		return nil, fmt.Errorf("list map containers of deployment %q: %w", deployment, err)
	}
	return list, nil
}

// StopMap stops a container cleanly: SIGTERM, then SIGKILL once grace has passed. A
// container that is gone or already stopped counts as stopped.
func StopMap(ctx context.Context, api API, id string, grace time.Duration) error {
	secs := int((grace + time.Second - 1) / time.Second)
	err := api.ContainerStop(ctx, id, container.StopOptions{Timeout: &secs})
	if err != nil && !errdefs.IsNotFound(err) && !errdefs.IsNotModified(err) {
		return fmt.Errorf("stop container %s: %w", shortID(id), err)
	}
	return nil
}

// RemoveMap force-removes a container. A container that is already gone is not an error.
func RemoveMap(ctx context.Context, api API, id string) error {
	err := api.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
	if err != nil && !errdefs.IsNotFound(err) && !errdefs.IsConflict(err) {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	return nil
}

// PublishedPorts reads the host ports (on 127.0.0.1) of a map container's game and
// control ports.
func PublishedPorts(ctx context.Context, api API, id string) (game, ctrl int, err error) {
	info, err := api.ContainerInspect(ctx, id)
	if err != nil {
		return 0, 0, fmt.Errorf("inspect container %s: %w", id, err)
	}
	if info.NetworkSettings == nil {
		return 0, 0, errors.New("container has no network settings")
	}
	port := func(p int) (int, error) {
		for _, b := range info.NetworkSettings.Ports[nat.Port(strconv.Itoa(p)+"/tcp")] {
			if b.HostIP == "127.0.0.1" {
				return strconv.Atoi(b.HostPort)
			}
		}
		return 0, fmt.Errorf("port %d/tcp is not published on 127.0.0.1", p)
	}
	if game, err = port(MapGamePort); err != nil {
		return 0, 0, err
	}
	if ctrl, err = port(MapControlPort); err != nil {
		return 0, 0, err
	}
	return game, ctrl, nil
}
