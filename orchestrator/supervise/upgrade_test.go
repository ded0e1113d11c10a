package supervise

import (
	"context"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/orchestrator"
)

// TestUpgrade_SwitchesOnceTheNextContainerIsReady runs a live upgrade's container side:
// the next container starts beside the running one and the instance keeps its
// container until the next one registered and took its config; then the instance is
// the next container's (its generation, image and ports, in the route table's view
// too), the previous one is asked to hand its players over, stopped and removed, and
// the next one takes the instance's name. The wanted set keeps the new image.
func TestUpgrade_SwitchesOnceTheNextContainerIsReady(t *testing.T) {
	const next = "mapyard/map:next"
	r := newRig(t, func(r *rig) { r.Images = []string{next} })
	before := r.ready(t, "d-1")
	ctx := context.Background()

	inst, err := r.Upgrade(ctx, "d-1", next)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Upgrade == nil || inst.Upgrade.Phase != orchestrator.UpgradeStarting || inst.ContainerID != before.ContainerID {
		t.Fatalf("after Upgrade: %+v, want the running container and an upgrade starting", inst)
	}
	if _, err := r.Upgrade(ctx, "d-1", next); apierr.Code(err) != apierr.ECONFLICT {
		t.Fatalf("a second upgrade while one runs: %v, want conflict", err)
	}
	if err := r.Restart(ctx, "d-1"); apierr.Code(err) != apierr.ECONFLICT {
		t.Fatalf("a restart during an upgrade: %v, want conflict", err)
	}
	if g, _ := r.Gate("d-1"); g.ContainerID != before.ContainerID {
		t.Fatalf("players routed to %s before the next container is ready", g.ContainerID)
	}

	// The next container registers under its own generation.
	var succ Container
	r.rt.mu.Lock()
	for _, c := range r.rt.containers {
		if c.ID != before.ContainerID && c.InstanceID == "d-1" && c.Image == next {
			succ = c.Container
		}
	}
	r.rt.mu.Unlock()
	if succ.ID == "" {
		t.Fatal("no next container started")
	}
	if err := r.MapReady(ctx, orchestrator.MapRegistration{InstanceID: "d-1", Generation: succ.Identity.Generation}); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "the upgrade's end", func() bool {
		u := r.state("d-1").Upgrade
		return u != nil && u.Phase == orchestrator.UpgradeDone
	})
	after := r.state("d-1")
	if after.ContainerID != succ.ID || after.Image != next || after.Generation != succ.Identity.Generation || after.State != orchestrator.StateReady {
		t.Fatalf("after the upgrade: %+v, want ready on %s (%s, generation %s)", after, succ.ID, next, succ.Identity.Generation)
	}
	if r.rt.exists(before.ContainerID) || r.rt.count("handoff") != 1 || r.rt.count("assign") != 1 {
		t.Fatalf("previous container left %v, handoffs %d, renames %d; want it removed after one handoff and the next renamed",
			r.rt.exists(before.ContainerID), r.rt.count("handoff"), r.rt.count("assign"))
	}
	if starts := r.rt.startsOf("d-1"); len(starts) != 2 {
		t.Fatalf("start-instance sent %d times, want once per container", len(starts))
	}
	r.waitFor(t, "the new image in the wanted set", func() bool {
		w, _ := r.store.ListInstances(ctx)
		return len(w) == 1 && w[0].Image == next
	})
	if r.saw("restart") {
		t.Fatalf("an upgrade went through a restart: %v", r.transitions)
	}
}

// TestUpgrade_RefusedTouchesNothing: an image the host does not allow, one the engine
// lacks and an unknown map are refused at once, with nothing started or changed.
func TestUpgrade_RefusedTouchesNothing(t *testing.T) {
	const missing = "mapyard/map:missing"
	r := newRig(t, func(r *rig) {
		r.Images = []string{missing}
		r.rt.setMissing(missing, true)
	})
	before := r.ready(t, "d-1")
	ctx := context.Background()
	for _, c := range []struct {
		id, image, code string
	}{
		{"d-1", "evil/miner:1", apierr.EIMAGENOTALLOWED},
		{"d-1", missing, apierr.EIMAGEMISSING},
		{"nope-1", missing, apierr.ENOTFOUND},
	} {
		if _, err := r.Upgrade(ctx, c.id, c.image); apierr.Code(err) != c.code {
			t.Fatalf("upgrade %s to %s: %v, want %s", c.id, c.image, err, c.code)
		}
	}
	if after := r.state("d-1"); after.ContainerID != before.ContainerID || after.Image != before.Image || after.Upgrade != nil {
		t.Fatalf("a refused upgrade changed the map: %+v", after)
	}
}

// TestUpgrade_NextRefusesConfig: a next container whose game refuses the instance's
// config fails the upgrade; it is removed and the map runs on where it was.
func TestUpgrade_NextRefusesConfig(t *testing.T) {
	const next = "mapyard/map:next"
	r := newRig(t, func(r *rig) { r.Images = []string{next} })
	before := r.ready(t, "d-1")
	ctx := context.Background()
	if _, err := r.Upgrade(ctx, "d-1", next); err != nil {
		t.Fatal(err)
	}
	var succ Container
	r.rt.mu.Lock()
	for _, c := range r.rt.containers {
		if c.ID != before.ContainerID {
			succ = c.Container
		}
	}
	r.rt.refuse = "this game needs a smaller arena"
	r.rt.mu.Unlock()
	if err := r.MapReady(ctx, orchestrator.MapRegistration{InstanceID: "d-1", Generation: succ.Identity.Generation}); err == nil {
		t.Fatal("the refused next container's registration succeeded")
	}
	r.waitFor(t, "the upgrade's failure", func() bool {
		u := r.state("d-1").Upgrade
		return u != nil && u.Phase == orchestrator.UpgradeFailed
	})
	after := r.state("d-1")
	if after.ContainerID != before.ContainerID || after.State != orchestrator.StateReady || r.rt.exists(succ.ID) {
		t.Fatalf("after a failed upgrade: %+v, next container left %v", after, r.rt.exists(succ.ID))
	}
}

// TestUpgrade_ResumedAfterOrchestratorRestart: an orchestrator that finds a live
// upgrade's next container running beside the instance's own (the last one died
// mid-upgrade) carries the upgrade forward: the next container is told its instance,
// becomes the instance's, the previous one is asked to hand over whoever it still
// holds and is removed. An upgrade's next container whose instance is not wanted is
// an orphan.
func TestUpgrade_ResumedAfterOrchestratorRestart(t *testing.T) {
	const next = "mapyard/map:next"
	var prev, succ string
	r := newRig(t, func(r *rig) {
		r.Images = []string{next}
		prev = r.rt.add("d-1", "d-1", false, true)
		succ = r.rt.add("d-1", "d-1", false, true)
		r.rt.mu.Lock()
		r.rt.containers[succ].Successor, r.rt.containers[succ].Image = true, next
		r.rt.mu.Unlock()
	})
	r.waitFor(t, "the resumed upgrade's end", func() bool {
		u := r.state("d-1").Upgrade
		return u != nil && u.Phase == orchestrator.UpgradeDone
	})
	after := r.state("d-1")
	if after.ContainerID != succ || after.Image != next || r.rt.exists(prev) || r.rt.count("handoff") != 1 {
		t.Fatalf("after the resumed upgrade: %+v; previous container left %v, handoffs %d", after, r.rt.exists(prev), r.rt.count("handoff"))
	}
	if got := r.rt.startsOf("d-1"); len(got) == 0 {
		t.Fatal("the next container was not told its instance")
	}
}
