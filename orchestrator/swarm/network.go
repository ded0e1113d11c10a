package swarm

import (
	"context"
	"fmt"
	"net"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"

	"github.com/mapyard/mapyard/orchestrator/docker"
)

// GatewayBridge is the bridge network through which a Swarm task's container reaches
// its own node (and the outside): every node has one, which Docker creates with the
// first overlay task unless the host created it first.
const GatewayBridge = "docker_gwbridge"

// NetworkAPI is the part of *client.Client EnsureNetwork uses.
type NetworkAPI interface {
	Info(ctx context.Context) (system.Info, error)
	NetworkInspect(ctx context.Context, networkID string, options network.InspectOptions) (network.Inspect, error)
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
}

// Network is the maps' network as EnsureNetwork leaves it.
type Network struct {
	ID string
	// Gateway is the IPv4 gateway of this node's docker_gwbridge: where maps on this
	// node reach the orchestrator.
	Gateway string
}

// EnsureNetwork checks that the engine is a Swarm manager and returns the overlay
// network name for maps, creating it (attachable, labelled as mapyard's) if it does
// not exist, with the gateway through which this node's maps reach the orchestrator.
// docker_gwbridge is created as Docker would (inter-container traffic off) when the
// node has none yet, so the gateway is known before the first map starts.
func EnsureNetwork(ctx context.Context, api NetworkAPI, name string) (Network, error) {
	info, err := api.Info(ctx)
	if err != nil {
		return Network{}, fmt.Errorf("docker info: %w", err)
	}
	if info.Swarm.LocalNodeState != "active" || !info.Swarm.ControlAvailable {
		return Network{}, fmt.Errorf("%w (node state %q): run `docker swarm init` on it, or set ORCH_RUNTIME=docker", ErrNotManager, info.Swarm.LocalNodeState)
	}
	nw, err := api.NetworkInspect(ctx, name, network.InspectOptions{Scope: "swarm"})
	if errdefs.IsNotFound(err) {
		var created network.CreateResponse
		created, err = api.NetworkCreate(ctx, name, network.CreateOptions{
			Driver: "overlay", Scope: "swarm", Attachable: true,
			Labels: map[string]string{docker.LabelManaged: "true"},
		})
		if err != nil && !errdefs.IsConflict(err) {
			return Network{}, fmt.Errorf("create overlay network %q: %w", name, err)
		}
		nw.ID, nw.Driver = created.ID, "overlay"
		if created.ID == "" {
			nw, err = api.NetworkInspect(ctx, name, network.InspectOptions{Scope: "swarm"})
		}
	}
	if err != nil {
		return Network{}, fmt.Errorf("inspect network %q: %w", name, err)
	}
	if nw.Driver != "overlay" {
		return Network{}, fmt.Errorf("network %q is a %s network, not an overlay; set ORCH_SWARM_NETWORK to another name", name, nw.Driver)
	}
	gw, err := gateway(ctx, api)
	if err != nil {
		return Network{}, err
	}
	return Network{ID: nw.ID, Gateway: gw}, nil
}

// gateway returns docker_gwbridge's IPv4 gateway, creating the network first if this
// node has none.
func gateway(ctx context.Context, api NetworkAPI) (string, error) {
	nw, err := api.NetworkInspect(ctx, GatewayBridge, network.InspectOptions{})
	if errdefs.IsNotFound(err) {
		_, err = api.NetworkCreate(ctx, GatewayBridge, network.CreateOptions{Driver: "bridge", Options: map[string]string{
			"com.docker.network.bridge.name":                 GatewayBridge,
			docker.OptionICC:                                 "false",
			"com.docker.network.bridge.enable_ip_masquerade": "true",
		}})
		if err != nil && !errdefs.IsConflict(err) {
			return "", fmt.Errorf("create network %s: %w", GatewayBridge, err)
		}
		nw, err = api.NetworkInspect(ctx, GatewayBridge, network.InspectOptions{})
	}
	if err != nil {
		return "", fmt.Errorf("inspect network %s: %w", GatewayBridge, err)
	}
	for _, c := range nw.IPAM.Config {
		if ip := net.ParseIP(c.Gateway); ip != nil && ip.To4() != nil {
			return c.Gateway, nil
		}
	}
	return "", fmt.Errorf("network %s has no IPv4 gateway", GatewayBridge)
}
