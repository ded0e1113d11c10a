package docker

import (
	"strings"

	"github.com/mapyard/mapyard/orchestrator/control"
)

// ContainerNamePrefix starts the Docker name of every map container.
const ContainerNamePrefix = "mapyard-map-"

// ContainerName is the Docker container name of a map instance, the name ops type in
// `docker logs`. A warm-pool container is renamed to it when it is handed the
// instance, so the name, not the io.mapyard.instance label (fixed at create), says
// which instance a container runs.
func ContainerName(instanceID string) string { return ContainerNamePrefix + instanceID }

// InstanceFromContainerName returns the instance id of a map container name as Docker
// reports it (with or without the leading "/"), or ok=false for other names.
func InstanceFromContainerName(name string) (id string, ok bool) {
	id, ok = strings.CutPrefix(strings.TrimPrefix(name, "/"), ContainerNamePrefix)
	return id, ok && control.ValidName(id)
}

// Container labels. The orchestrator owns containers by label, never by name alone, so
// it can find (and adopt or remove) its containers after a restart.
const (
	LabelManaged  = "io.mapyard.managed"
	LabelInstance = "io.mapyard.instance"
	LabelMap      = "io.mapyard.map"
	// LabelPool marks warm-pool containers, created blank.
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
