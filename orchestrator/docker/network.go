package docker

import (
	"context"
	"fmt"
	"net"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
)

// OptionICC is Docker's bridge option for inter-container communication. The map
// network sets it to "false": the engine then drops traffic between containers of the
// network (with iptables rules it manages), so a map cannot reach another map's ports,
// while every map still reaches the host on the network's gateway, where the
// orchestrator's control listener binds.
const OptionICC = "com.docker.network.bridge.enable_icc"

// NetworkAPI is the part of *client.Client EnsureNetwork uses.
type NetworkAPI interface {
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
	NetworkRemove(ctx context.Context, networkID string) error
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	ContainerRemove(ctx context.Context, containerID string, options container.RemoveOptions) error
}

// Network is the map network as EnsureNetwork leaves it.
type Network struct {
	ID      string
	Gateway string // IPv4 of the bridge on the host: where maps reach the orchestrator
	// Isolated reports whether the network was created with inter-container
	// communication off. It is false only when an older network without the option is
	// still used by containers of another deployment and could not be replaced.
	Isolated bool
}

// EnsureNetwork returns the user-defined bridge network name, creating it (labelled as
// mapyard's, inter-container communication off) if it does not exist.
//
// A network of that name from an older version, created without the option, is
// replaced when only that version's containers of this deployment are on it: those hold
// the old shared secret and no credentials, so adoption would replace them anyway; they
// are removed, then the network is removed and created again. The orchestrator calls it
// once, before it adopts containers. When any other container is on the network (of
// another deployment, or one with credentials, which is adopted as it is), the network
// is left alone and returned with Isolated false for the caller to report.
//
// The engine does not make names unique atomically: processes creating the network at
// the same moment may get one each. All of them then use the oldest, and the losers
// remove their own.
func EnsureNetwork(ctx context.Context, api NetworkAPI, name, deployment string) (Network, error) {
	nw, err := oldestNetwork(ctx, api, name)
	if err == nil && nw.Options[OptionICC] != "false" {
		replaced, rerr := replaceNetwork(ctx, api, nw, deployment)
		if rerr != nil {
			return Network{}, rerr
		}
		if !replaced {
			return networkOf(nw)
		}
		err = errdefs.ErrNotFound
	}
	if errdefs.IsNotFound(err) {
		created, cerr := api.NetworkCreate(ctx, name, network.CreateOptions{
			Driver:  "bridge",
			Labels:  map[string]string{LabelManaged: "true"},
			Options: map[string]string{OptionICC: "false"},
		})
		if cerr != nil && !errdefs.IsConflict(cerr) {
			return Network{}, fmt.Errorf("create network %q: %w", name, cerr)
		}
		nw, err = oldestNetwork(ctx, api, name)
		if err == nil && created.ID != "" && created.ID != nw.ID {
			_ = api.NetworkRemove(ctx, created.ID)
		}
	}
	if err != nil {
		return Network{}, err
	}
	return networkOf(nw)
}

// network_ reads what EnsureNetwork returns from a network summary.
func networkOf(nw network.Summary) (Network, error) {
	for _, c := range nw.IPAM.Config {
		if ip := net.ParseIP(c.Gateway); ip != nil && ip.To4() != nil {
			return Network{ID: nw.ID, Gateway: c.Gateway, Isolated: nw.Options[OptionICC] == "false"}, nil
		}
	}
	return Network{}, fmt.Errorf("network %q has no IPv4 gateway", nw.Name)
}

// replaceNetwork removes an older map network that lets containers talk to each other,
// with this deployment's containers of versions before credentials, unless any other
// container (in any state: a created one may be about to start) is on it. It reports
// whether the network is gone.
func replaceNetwork(ctx context.Context, api NetworkAPI, nw network.Summary, deployment string) (bool, error) {
	list, err := api.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("network", nw.ID))})
	if err != nil {
		return false, fmt.Errorf("list containers on network %q: %w", nw.Name, err)
	}
	var ours []string
	for _, c := range list {
		if c.Labels[LabelManaged] != "true" || c.Labels[LabelDeployment] != deployment || c.Labels[LabelGeneration] != "" {
			return false, nil
		}
		ours = append(ours, c.ID)
	}
	for _, id := range ours {
		err := api.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
		if err != nil && !errdefs.IsNotFound(err) && !errdefs.IsConflict(err) {
			return false, fmt.Errorf("remove container %s from the old map network: %w", shortID(id), err)
		}
	}
	if err := api.NetworkRemove(ctx, nw.ID); err != nil && !errdefs.IsNotFound(err) {
		// Something attached meanwhile: keep the old network rather than break it.
		return false, nil
	}
	return true, nil
}

// oldestNetwork returns the oldest network called exactly name.
func oldestNetwork(ctx context.Context, api NetworkAPI, name string) (network.Summary, error) {
	list, err := api.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return network.Summary{}, fmt.Errorf("list networks %q: %w", name, err)
	}
	var out network.Summary
	found := false
	for _, nw := range list {
		if nw.Name != name {
			continue // the name filter matches substrings
		}
		if !found || nw.Created.Before(out.Created) || (nw.Created.Equal(out.Created) && nw.ID < out.ID) {
			out, found = nw, true
		}
	}
	if !found {
		return network.Summary{}, fmt.Errorf("no network %q: %w", name, errdefs.ErrNotFound)
	}
	return out, nil
}
