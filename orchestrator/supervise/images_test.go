package supervise

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/orchestrator"
)

// These tests drive the image rules over the fake runtime: which images a map may run,
// what happens when the engine lacks one, and the warm pool's spares per image.

// dungeon is a second game's image the rigs' host allows beside the default.
const dungeon = "studio/dungeon:1"

// createImage adds instance id (map "frontier") of image through the admin path.
func (r *rig) createImage(t *testing.T, id, image string) {
	t.Helper()
	if _, err := r.Create(context.Background(), orchestrator.CreateInstance{InstanceID: id, MapID: "frontier", Image: image}); err != nil {
		t.Fatal(err)
	}
}

// registeredSpare waits for a started, unregistered warm-pool container of image,
// registers its blank map, and returns its pool id and container id.
func (r *rig) registeredSpare(t *testing.T, image string) (poolID, containerID string) {
	t.Helper()
	r.waitFor(t, "a pool container of "+image, func() bool {
		r.Supervisor.mu.Lock()
		defer r.Supervisor.mu.Unlock()
		for id, m := range r.pool {
			if m.image == image && m.started && !m.registered {
				poolID, containerID = id, m.containerID
				return true
			}
		}
		return false
	})
	if err := r.MapReady(context.Background(), orchestrator.MapRegistration{InstanceID: poolID}); err != nil {
		t.Fatal(err)
	}
	return poolID, containerID
}

// poolImage returns the pool's status for image.
func (r *rig) poolImage(image string) PoolImageStatus {
	for _, is := range r.Pool().Images {
		if is.Image == image {
			return is
		}
	}
	return PoolImageStatus{Image: image}
}

func imageGauge(r *rig, image string, st orchestrator.InstanceState) float64 {
	return testutil.ToFloat64(r.Metrics.ImageInstances.WithLabelValues(image, string(st)))
}

func TestRules_ImageNotAllowedStartsNothing(t *testing.T) {
	r := newRig(t, func(r *rig) { r.Images = []string{dungeon} })
	r.ready(t, "d-1")
	starts := r.rt.count("start")

	_, err := r.Create(context.Background(), orchestrator.CreateInstance{InstanceID: "evil-1", MapID: "frontier", Image: "evil/miner:1"})
	if got, want := apierr.Code(err), apierr.EIMAGENOTALLOWED; got != want {
		t.Fatalf("create of a map of an image the host does not allow: %v, want %s", err, want)
	}
	if msg := apierr.Message(err); !strings.Contains(msg, `"evil/miner:1"`) || !strings.Contains(msg, dungeon) || !strings.Contains(msg, DefaultImage) {
		t.Fatalf("message %q does not name the image and what the host allows", msg)
	}
	if _, err := r.Instance("evil-1"); apierr.Code(err) != apierr.ENOTFOUND {
		t.Fatalf("the refused instance exists: %v", err)
	}
	if got, _ := r.store.ListInstances(context.Background()); len(got) != 1 {
		t.Fatalf("wanted set %+v, want the default instance only", got)
	}
	if r.rt.count("start") != starts || r.rt.count("start-image evil/miner:1") != 0 {
		t.Fatalf("a container was started for a refused image")
	}

	t.Run("DefaultImageAlwaysAllowed", func(t *testing.T) {
		// ORCH_MAP_IMAGE is allowed whether or not ORCH_MAP_IMAGES lists it.
		r.createImage(t, "plain-1", DefaultImage)
		r.ready(t, "plain-1")
		if inst := r.state("plain-1"); inst.Image != DefaultImage || r.rt.imageOf(inst.ContainerID) != DefaultImage {
			t.Fatalf("plain-1 %+v runs %q", inst, r.rt.imageOf(inst.ContainerID))
		}
	})
	t.Run("NamingNoneRunsTheDefault", func(t *testing.T) {
		r.create(t, "b-1")
		r.ready(t, "b-1")
		if inst := r.state("b-1"); inst.Image != DefaultImage || r.rt.imageOf(inst.ContainerID) != DefaultImage {
			t.Fatalf("b-1 %+v runs %q, want the default image", inst, r.rt.imageOf(inst.ContainerID))
		}
	})
}

// TestRules_ImageMissing: a map whose image the engine lacks goes to image_missing —
// not restarted, not quarantined, not retried by time passing or by joins — and leaves
// it when an operator restarts it once the image exists.
func TestRules_ImageMissing(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, func(r *rig) {
		r.Images = []string{dungeon}
		r.rt.setMissing(dungeon, true)
	})
	r.ready(t, "d-1")
	r.createImage(t, "dun-1", dungeon)
	r.waitFor(t, "image_missing", func() bool { return r.state("dun-1").State == orchestrator.StateImageMissing })
	inst := r.state("dun-1")
	if inst.Image != dungeon || inst.Restarts != 0 || inst.ContainerID != "" {
		t.Fatalf("dun-1 %+v, want image %s, no restart, no container", inst, dungeon)
	}
	if want := `image "studio/dungeon:1" is missing on the engine`; !strings.Contains(inst.Reason, want) || !strings.Contains(inst.Reason, "restart") {
		t.Fatalf("reason %q, want %q and what to do", inst.Reason, want)
	}
	if !r.saw("dun-1 starting→image_missing") {
		t.Fatal("the state change to image_missing was not reported")
	}
	if got := imageGauge(r, dungeon, orchestrator.StateImageMissing); got != 1 {
		t.Fatalf("maps of %s in image_missing: %v, want 1", dungeon, got)
	}

	t.Run("NoRestartLoop", func(t *testing.T) {
		for range 5 {
			r.clock.Add(time.Minute)
			r.check(ctx)
		}
		r.settle(t)
		if inst := r.state("dun-1"); inst.State != orchestrator.StateImageMissing || inst.Restarts != 0 {
			t.Fatalf("after five minutes: %+v", inst)
		}
		if n := r.rt.count("start-image " + dungeon); n != 1 {
			t.Fatalf("%d starts of %s, want the one of the create", n, dungeon)
		}
		if testutil.ToFloat64(r.Metrics.Quarantines) != 0 || testutil.ToFloat64(r.Metrics.Restarts.WithLabelValues("dun-1")) != 0 {
			t.Fatal("a missing image was counted as a crash")
		}
	})
	t.Run("JoinsFailFast", func(t *testing.T) {
		_, err := r.Acquire(ctx, "dun-1")
		if apierr.Code(err) != apierr.EMAPUNAVAILABLE || !strings.Contains(apierr.Message(err), "image_missing") {
			t.Fatalf("Acquire: %v, want map_unavailable saying image_missing", err)
		}
		if _, err := r.Gate("dun-1"); apierr.Code(err) != apierr.EMAPUNAVAILABLE {
			t.Fatalf("Gate: %v", err)
		}
		if n := r.rt.count("start-image " + dungeon); n != 1 {
			t.Fatalf("a join tried the image again (%d starts)", n)
		}
	})
	t.Run("RestartWhileStillMissing", func(t *testing.T) {
		if err := r.Restart(ctx, "dun-1"); err != nil {
			t.Fatal(err)
		}
		r.settle(t)
		if inst := r.state("dun-1"); inst.State != orchestrator.StateImageMissing || r.rt.count("start-image "+dungeon) != 2 {
			t.Fatalf("after a restart with the image still missing: %+v", inst)
		}
	})
	t.Run("LazySpawnFindsItMissing", func(t *testing.T) {
		if err := r.Stop(ctx, "dun-1"); err != nil {
			t.Fatal(err)
		}
		// A join starts the stopped map, finds the image missing and is answered at
		// once, not after the start timeout.
		_, err := r.Acquire(ctx, "dun-1")
		if apierr.Code(err) != apierr.EMAPUNAVAILABLE || !strings.Contains(apierr.Message(err), "missing on the engine") {
			t.Fatalf("Acquire of a stopped map of a missing image: %v", err)
		}
	})
	t.Run("LeavesOnRestartOnceTheImageExists", func(t *testing.T) {
		r.rt.setMissing(dungeon, false)
		if err := r.Restart(ctx, "dun-1"); err != nil {
			t.Fatal(err)
		}
		inst := r.ready(t, "dun-1")
		if r.rt.imageOf(inst.ContainerID) != dungeon || inst.Restarts != 0 {
			t.Fatalf("dun-1 %+v runs %q", inst, r.rt.imageOf(inst.ContainerID))
		}
		if imageGauge(r, dungeon, orchestrator.StateImageMissing) != 0 || imageGauge(r, dungeon, orchestrator.StateReady) != 1 {
			t.Fatal("the per-image gauge did not follow the map to ready")
		}
	})
}

// TestRules_PoolSparesPerImage: the pool keeps spares of the default image from the
// start and of another image once a map of it has started; a spare is handed only to
// a map of its own image.
func TestRules_PoolSparesPerImage(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, func(r *rig) { r.PoolSize, r.Images = 1, []string{dungeon} })
	r.ready(t, "d-1")
	_, defSpare := r.registeredSpare(t, DefaultImage)
	if got := r.poolImage(dungeon); got.Want != 0 || got.Size != 0 || r.rt.count("start-pool-image "+dungeon) != 0 {
		t.Fatalf("spares of %s before any map of it: %+v", dungeon, got)
	}

	// The first map of the dungeon image starts cold: the default spare is not its image.
	r.createImage(t, "dun-1", dungeon)
	inst := r.ready(t, "dun-1")
	if r.rt.imageOf(inst.ContainerID) != dungeon || inst.ContainerID == defSpare || inst.Image != dungeon {
		t.Fatalf("dun-1 %+v runs %q", inst, r.rt.imageOf(inst.ContainerID))
	}
	if got := r.poolImage(DefaultImage); got.Ready != 1 {
		t.Fatalf("default spares %+v, want the one kept", got)
	}

	// Now the pool keeps a spare of it, and the next map of it takes that one.
	dunPool, dunSpare := r.registeredSpare(t, dungeon)
	if got := r.poolImage(dungeon); got.Want != 1 || got.Ready != 1 {
		t.Fatalf("spares of %s after its first map: %+v", dungeon, got)
	}
	if got := testutil.ToFloat64(r.Metrics.PoolImageReady.WithLabelValues(dungeon)); got != 1 {
		t.Fatalf("ready spares of %s: %v", dungeon, got)
	}
	r.createImage(t, "dun-2", dungeon)
	inst, err := r.Acquire(ctx, "dun-2")
	if err != nil {
		t.Fatal(err)
	}
	if inst.ContainerID != dunSpare || !r.saw("dun-2 starting→ready: handed warm pool container "+dunPool) {
		t.Fatalf("dun-2 %+v, want the %s spare %s", inst, dungeon, dunSpare)
	}

	// A map that names no image takes the default spare.
	r.create(t, "b-1")
	if inst, err := r.Acquire(ctx, "b-1"); err != nil || inst.ContainerID != defSpare || inst.Image != DefaultImage {
		t.Fatalf("b-1 %+v (%v), want the default spare %s", inst, err, defSpare)
	}
	if got := imageGauge(r, dungeon, orchestrator.StateReady); got != 2 {
		t.Fatalf("ready maps of %s: %v, want 2", dungeon, got)
	}
	r.waitFor(t, "both spares refilled", func() bool {
		return r.rt.count("start-pool-image "+dungeon) == 2 && r.rt.count("start-pool-image "+DefaultImage) == 2
	})
}

// TestRules_PoolSkipsAMissingImage: when the engine lacks an image the pool would keep
// spares of, the pool tries once and then leaves it alone (no refill loop) until a map
// of that image starts.
func TestRules_PoolSkipsAMissingImage(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, func(r *rig) {
		r.PoolSize, r.Images = 1, []string{dungeon}
		// Wanted running: its image is one the pool serves from the start.
		_ = r.store.PutInstance(ctx, orchestrator.WantedInstance{ID: "dun-1", MapID: "frontier", Image: dungeon, Status: orchestrator.StatusRunning})
		r.rt.setMissing(dungeon, true)
	})
	r.ready(t, "d-1")
	r.waitFor(t, "the pool to find the image missing", func() bool { return r.poolImage(dungeon).Missing })
	if inst := r.state("dun-1"); inst.State != orchestrator.StateImageMissing {
		t.Fatalf("dun-1 %+v, want image_missing", inst)
	}

	// Handing the default spare out makes the pool refill; the refill round passes the
	// missing image by.
	r.registeredSpare(t, DefaultImage)
	r.create(t, "b-1")
	if _, err := r.Acquire(ctx, "b-1"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "the default spare refilled", func() bool { return r.rt.count("start-pool-image "+DefaultImage) == 2 })
	r.registeredSpare(t, DefaultImage)
	if n := r.rt.count("start-pool-image " + dungeon); n != 1 {
		t.Fatalf("%d spare starts of the missing image, want 1", n)
	}

	// Once the image exists and a map of it starts, its spares are kept again.
	r.rt.setMissing(dungeon, false)
	if err := r.Restart(ctx, "dun-1"); err != nil {
		t.Fatal(err)
	}
	r.ready(t, "dun-1")
	r.registeredSpare(t, dungeon)
	if got := r.poolImage(dungeon); got.Missing || got.Ready != 1 {
		t.Fatalf("spares of %s after its map started: %+v", dungeon, got)
	}
}

// TestRules_AdoptionKeepsImages: an adopted map keeps the image it runs (adoption
// starts nothing), and a blank pool container is kept only if the pool serves its image.
func TestRules_AdoptionKeepsImages(t *testing.T) {
	var old, spare, stray string
	r := newRig(t, func(r *rig) {
		r.PoolSize, r.Images = 1, []string{dungeon}
		_ = r.store.PutInstance(context.Background(), orchestrator.WantedInstance{ID: "b-1", MapID: "frontier", Status: orchestrator.StatusRunning})
		r.rt.add("d-1", "d-1", false, true)
		old = r.rt.add("b-1", "b-1", false, true)
		spare = r.rt.add(mapgen.PoolIDPrefix+"aa", mapgen.PoolIDPrefix+"aa", true, true)
		stray = r.rt.add(mapgen.PoolIDPrefix+"bb", mapgen.PoolIDPrefix+"bb", true, true)
		r.rt.mu.Lock()
		r.rt.containers[old].Image = "mapyard/map:previous" // the host's default before an upgrade
		r.rt.containers[spare].Image = DefaultImage
		r.rt.containers[stray].Image = dungeon // no map of it runs: the pool keeps none
		r.rt.mu.Unlock()
	})
	if inst := r.state("b-1"); inst.ContainerID != old || inst.Image != "mapyard/map:previous" {
		t.Fatalf("b-1 %+v, want adopted on %s with the image it runs", inst, old)
	}
	if got := r.poolImage(DefaultImage); got.Size != 1 {
		t.Fatalf("default spares %+v, want the blank one kept", got)
	}
	r.waitFor(t, "the spare of an image the pool does not serve removed", func() bool { return !r.rt.exists(stray) })

	t.Run("RestartRunsTheImageItNames", func(t *testing.T) {
		if err := r.Restart(context.Background(), "b-1"); err != nil {
			t.Fatal(err)
		}
		inst := r.ready(t, "b-1")
		if inst.Image != DefaultImage || r.rt.imageOf(inst.ContainerID) != DefaultImage {
			t.Fatalf("b-1 after a restart %+v runs %q, want the default image", inst, r.rt.imageOf(inst.ContainerID))
		}
		if imageGauge(r, "mapyard/map:previous", orchestrator.StateReady) != 0 || imageGauge(r, DefaultImage, orchestrator.StateReady) != 2 {
			t.Fatal("the per-image gauge did not follow the map to its new image")
		}
	})
}
