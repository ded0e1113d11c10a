package docker

import (
	"strings"

	"github.com/mapyard/mapyard/orchestrator/record"
)

// ContainerNamePrefix starts the Docker name of every map container.
const ContainerNamePrefix = "mapyard-map-"

// ContainerName is the Docker container name of a map instance, the name ops type in
// `docker logs`. A warm-pool container is renamed to it when it is handed the
// instance, so the name says which instance every map container runs.
func ContainerName(instanceID string) string { return ContainerNamePrefix + instanceID }

// PoolContainerName is the Docker container name of a blank warm-pool container,
// mapyard-pool-<hex> for pool id pool-<hex>: not a map's name, so `docker ps` tells
// blank containers from maps and no name points at an instance they do not run.
func PoolContainerName(poolID string) string { return "mapyard-" + poolID }

// poolFromContainerName returns the pool id of a blank pool container's name.
func poolFromContainerName(name string) (id string, ok bool) {
	id, ok = strings.CutPrefix(strings.TrimPrefix(name, "/"), "mapyard-")
	return id, ok && strings.HasPrefix(id, "pool-") && record.ValidName(id)
}

// InstanceFromContainerName returns the instance id of a map container name as Docker
// reports it (with or without the leading "/"), or ok=false for other names.
func InstanceFromContainerName(name string) (id string, ok bool) {
	id, ok = strings.CutPrefix(strings.TrimPrefix(name, "/"), ContainerNamePrefix)
	return id, ok && record.ValidName(id)
}

// Container labels. The orchestrator owns containers by label, never by name alone, so
// it can find (and adopt or remove) its containers after a restart.
const (
	LabelManaged = "io.mapyard.managed"
	// LabelInstance and LabelMap name the instance and map a container was created
	// for. A warm-pool container has neither: it is created blank, and labels cannot
	// change once a container exists.
	LabelInstance = "io.mapyard.instance"
	LabelMap      = "io.mapyard.map"
	// LabelPool marks a container created blank for the warm pool and holds its pool
	// id (pool-<hex>), the identity its credentials were minted for. Containers of
	// versions before this label carried "true" here and the pool id in LabelInstance.
	LabelPool = "io.mapyard.pool"
	// LabelDeployment scopes containers to one orchestrator deployment (ORCH_DEPLOYMENT),
	// so an orchestrator never adopts or removes another deployment's maps (or a test's).
	LabelDeployment = "io.mapyard.deployment"
	// LabelGeneration and LabelKeyID say whose credentials a container holds: with
	// LabelInstance (the id it was created for) they let a restarted orchestrator
	// recompute them. Neither is secret.
	LabelGeneration = "io.mapyard.generation"
	LabelKeyID      = "io.mapyard.keyid"
)
