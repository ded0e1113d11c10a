package supervise

import (
	"context"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/keys"
)

// credentialOf returns the identity of the map credential in env, failing the test when
// env holds none, or anything else secret.
func credentialOf(t *testing.T, env []string) keys.Identity {
	t.Helper()
	var id keys.Identity
	found := false
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == mapcontract.EnvCredential:
			var err error
			if id, err = testRoot.VerifyMapCredential(v); err != nil {
				t.Fatalf("%s does not verify: %v", k, err)
			}
			found = true
		case strings.Contains(k, "SECRET"):
			t.Fatalf("a map container gets %s", k)
		}
	}
	if !found {
		t.Fatalf("no %s in %v", mapcontract.EnvCredential, env)
	}
	return id
}

// TestCredentials checks that each container gets credentials of its own, that the
// supervisor tells which instance a credential may act for (following a pool container
// into the instance it is handed, and forgetting a replaced container), and that it
// reaches each map with that map's credential only (the fake runtime's maps refuse any
// other).
func TestCredentials(t *testing.T) {
	r := newRig(t, func(r *rig) { r.PoolSize = 1 })
	r.ready(t, "d-1")
	first := credentialOf(t, r.rt.envOf(r.state("d-1").ContainerID))
	if first.InstanceID != "d-1" {
		t.Fatalf("d-1's container holds the credential of %v", first)
	}
	t.Run("InstanceOfOwnContainer", func(t *testing.T) {
		if got, ok := r.InstanceOf(first); !ok || got != "d-1" {
			t.Fatalf("InstanceOf(%v) = %q, %v", first, got, ok)
		}
		if _, ok := r.InstanceOf(keys.Identity{InstanceID: "d-1", Generation: "0000"}); ok {
			t.Fatal("a generation never started is current")
		}
	})

	poolID := r.registeredPoolMember(t)
	r.Supervisor.mu.Lock()
	pooled := credentialOf(t, r.rt.envOf(r.pool[poolID].containerID))
	r.Supervisor.mu.Unlock()
	t.Run("PoolContainerFollowsItsHandout", func(t *testing.T) {
		if got, ok := r.InstanceOf(pooled); !ok || got != poolID {
			t.Fatalf("blank: InstanceOf = %q, %v, want %s", got, ok, poolID)
		}
		r.create(t, "b-1")
		if _, err := r.Acquire(context.Background(), "b-1"); err != nil {
			t.Fatal(err)
		}
		if got, ok := r.InstanceOf(pooled); !ok || got != "b-1" {
			t.Fatalf("handed out: InstanceOf = %q, %v, want b-1", got, ok)
		}
	})
	t.Run("ReplacedContainerForgotten", func(t *testing.T) {
		if err := r.Restart(context.Background(), "d-1"); err != nil {
			t.Fatal(err)
		}
		r.ready(t, "d-1")
		second := credentialOf(t, r.rt.envOf(r.state("d-1").ContainerID))
		if second == first {
			t.Fatal("the new container got the old container's identity")
		}
		if _, ok := r.InstanceOf(first); ok {
			t.Fatal("the replaced container's credential is still current")
		}
		if got, ok := r.InstanceOf(second); !ok || got != "d-1" {
			t.Fatalf("InstanceOf(new) = %q, %v", got, ok)
		}
	})
}

// TestCredentials_ReplacesContainersWithoutThem checks the upgrade path: a running
// container of a version before credentials (or of another root) is not adopted but
// replaced by one that holds credentials of this orchestrator.
func TestCredentials_ReplacesContainersWithoutThem(t *testing.T) {
	var legacy, otherRoot string
	r := newRig(t, func(r *rig) {
		_ = r.store.PutInstance(context.Background(), orchestrator.WantedInstance{ID: "b-1", MapID: "frontier", Status: orchestrator.StatusRunning})
		legacy = r.rt.addLegacy("d-1")
		otherRoot = r.rt.add("b-1", "b-1", false, true)
		r.rt.mu.Lock()
		r.rt.containers[otherRoot].KeyID = "0123456789ab"
		r.rt.mu.Unlock()
	})
	for id, old := range map[string]string{"d-1": legacy, "b-1": otherRoot} {
		inst := r.ready(t, id)
		if inst.ContainerID == old || r.rt.exists(old) {
			t.Fatalf("%s still runs on %s", id, old)
		}
		if got := credentialOf(t, r.rt.envOf(inst.ContainerID)); got.InstanceID != id {
			t.Fatalf("%s's new container holds %v", id, got)
		}
	}
	if !r.saw("replacing a container without credentials of this orchestrator") {
		t.Fatal("replacement not visible in the transitions")
	}
}
