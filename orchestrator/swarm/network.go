package swarm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"

	"github.com/mapyard/mapyard/orchestrator/docker"
)

// NetworkAPI is the part of *client.Client EnsureNetwork uses.
type NetworkAPI interface {
	Info(ctx context.Context) (system.Info, error)
	NetworkInspect(ctx context.Context, networkID string, options network.InspectOptions) (network.Inspect, error)
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
}

// Network is the maps' network as EnsureNetwork leaves it.
type Network struct {
	ID string
	// Subnets are the network's address ranges: where the orchestrator finds its own
	// address on it (SelfAddress).
	Subnets []netip.Prefix
}

// EnsureNetwork checks that the engine is a Swarm manager and returns the overlay
// network name for maps, creating it (attachable, labelled as mapyard's) if it does
// not exist. compose/stack.yaml creates it before the orchestrator starts, so that the
// orchestrator and the edge run on it.
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
	out := Network{ID: nw.ID}
	for _, c := range nw.IPAM.Config {
		if p, err := netip.ParsePrefix(c.Subnet); err == nil {
			out.Subnets = append(out.Subnets, p)
		}
	}
	return out, nil
}

// SelfAddress is this process's own address on network n: the orchestrator, a
// container on the maps' overlay network, binds its control listener there for maps
// and the edge. An orchestrator outside the network (on the host, say) cannot reach
// maps, which publish no port, and is refused with what to do instead.
func SelfAddress(n Network, name string) (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("interface addresses: %w", err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		for _, p := range n.Subnets {
			if p.Contains(ip.Unmap()) {
				return ip.Unmap().String(), nil
			}
		}
	}
	return "", fmt.Errorf("%w: this process has no address on overlay network %q (subnets %v); run the orchestrator as a container on it, as compose/stack.yaml does", ErrNotOnNetwork, name, n.Subnets)
}

// ErrNotOnNetwork is why an orchestrator outside the maps' overlay network does not
// start with ORCH_RUNTIME=swarm.
var ErrNotOnNetwork = errors.New("the orchestrator is not on the maps' overlay network")
