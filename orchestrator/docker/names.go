package docker

import (
	"strings"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator/supervise"
)

// DefaultDeployment is ORCH_DEPLOYMENT's default. Its containers carry the plain names
// ops type (`docker logs mapyard-map-default-1`); every other deployment's names end in
// ".<deployment>", so two deployments on one engine never want the same name.
const DefaultDeployment = "mapyard"

// ContainerNamePrefix starts the Docker name of every map container.
const ContainerNamePrefix = "mapyard-map-"

// poolNamePrefix starts the Docker name of every blank warm-pool container (the pool id
// itself starts with mapgen.PoolIDPrefix).
const poolNamePrefix = "mapyard-"

// nameSuffix is what a deployment adds to its container names: nothing for the
// default deployment, ".<deployment>" for any other. Ids and deployments are
// a-z, 0-9 and '-' only (record.IDRule), so the '.' cannot be part of either and a name
// reads back unambiguously.
func nameSuffix(deployment string) string {
	if deployment == DefaultDeployment || deployment == "" {
		return ""
	}
	return "." + deployment
}

// successorSuffix ends the name of a live upgrade's next container of an instance,
// which runs beside the instance's container until that one is gone and is then
// renamed to the instance's name: mapyard-map-default-1_next. '_' is no id's nor
// deployment's, so the name reads back unambiguously.
const successorSuffix = "_next"

// SuccessorName is the Docker name of a live upgrade's next container of instanceID.
func SuccessorName(deployment, instanceID string) string {
	return ContainerName(deployment, instanceID) + successorSuffix
}

// ContainerName is the Docker container name of a map instance of a deployment, the
// name ops type in `docker logs`: mapyard-map-<instanceId> in the default deployment,
// mapyard-map-<instanceId>.<deployment> in any other. A warm-pool container is renamed
// to it when it is handed the instance, so the name says which instance every map
// container runs.
func ContainerName(deployment, instanceID string) string {
	return ContainerNamePrefix + instanceID + nameSuffix(deployment)
}

// PoolContainerName is the Docker container name of a blank warm-pool container,
// mapyard-pool-<hex>[.<deployment>] for pool id pool-<hex>: not a map's name, so
// `docker ps` tells blank containers from maps and no name points at an instance they
// do not run.
func PoolContainerName(deployment, poolID string) string {
	return poolNamePrefix + poolID + nameSuffix(deployment)
}

// poolFromContainerName returns the pool id of a blank pool container's name.
func poolFromContainerName(deployment, name string) (id string, ok bool) {
	id, ok = idFromName(deployment, name, poolNamePrefix)
	return id, ok && mapgen.IsPoolID(id)
}

// InstanceFromContainerName returns the instance id of a map container name of
// deployment as Docker reports it (with or without the leading "/"), or ok=false for
// other names. A name without the deployment's suffix is read too: containers that
// versions before deployment-scoped names started are still adopted (by their label).
func InstanceFromContainerName(deployment, name string) (id string, ok bool) {
	return idFromName(deployment, strings.TrimSuffix(name, successorSuffix), ContainerNamePrefix)
}

// idFromName cuts prefix and the deployment's suffix off a container name and checks
// what is left is an id.
func idFromName(deployment, name, prefix string) (string, bool) {
	id, ok := strings.CutPrefix(strings.TrimPrefix(name, "/"), prefix)
	if !ok {
		return "", false
	}
	if s := nameSuffix(deployment); s != "" {
		id = strings.TrimSuffix(id, s)
	}
	return id, record.ValidName(id)
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
	// LabelImage names the image a container was created from, as the map's template
	// or admin create named it (or the host's default): `docker ps --filter
	// label=io.mapyard.image=mapyard/tag:latest` lists one game's maps, and a
	// restarted orchestrator knows which image a blank pool container serves even when
	// the engine reports the image only by id.
	LabelImage = "io.mapyard.image"
)

// Labels are the labels of the map container of spec in deployment; the Swarm runtime
// gives its services the same. A blank pool container runs no instance yet, so nothing
// of it names one: it is labelled with its pool id only.
func Labels(deployment string, s supervise.Spec) map[string]string {
	l := map[string]string{
		LabelManaged:    "true",
		LabelDeployment: deployment,
		LabelImage:      s.Image,
		LabelGeneration: s.Generation,
		LabelKeyID:      s.KeyID,
	}
	if s.Pool {
		l[LabelPool] = s.InstanceID
	} else {
		l[LabelInstance], l[LabelMap] = s.InstanceID, s.MapID
	}
	return l
}

// Owns reports whether a container with labels belongs to deployment: a map container
// (managed) labelled with that deployment. Nothing else may be stopped, renamed or
// removed, whatever its name.
func Owns(deployment string, labels map[string]string) bool {
	return labels[LabelManaged] == "true" && labels[LabelDeployment] == deployment
}
