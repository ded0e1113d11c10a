package docker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/supervise"
)

// labelled lists the deployment's containers carrying every label of kv ("k=v" or "k").
func (h *harness) labelled(kv ...string) []container.Summary {
	h.tb.Helper()
	args := filters.NewArgs(filters.Arg("label", docker.LabelDeployment+"="+h.deployment))
	for _, l := range kv {
		args.Add("label", l)
	}
	list, err := h.cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: args})
	if err != nil {
		h.tb.Fatal(err)
	}
	return list
}

// TestSupervisor_ImagePerMap runs maps of two images on the real engine: the kit's own
// and the same build tagged under a second name, as a second game's image would be. Each
// container runs and is labelled with its map's image, the warm pool keeps a spare of
// the second image once a map of it ran and hands it to the next, an image the host does
// not allow starts nothing, and one the engine lacks leaves its map in image_missing —
// no restarts — until it exists and an operator restarts the map.
func TestSupervisor_ImagePerMap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	suffix := dockertest.RandomHex(t, 4)
	alt, later := "mapyard/map-alt:"+suffix, "mapyard/map-alt:"+suffix+"-later"
	h := newHarness(t, func(s *supervise.Supervisor) {
		s.Images = []string{alt, later}
		s.PoolSize = 1
	})
	dockertest.TagImage(t, h.cli, dockertest.MapImage(), alt)
	def := h.deployment + "-d"
	h.waitState(def, orchestrator.StateReady, 30*time.Second)

	create := func(id, image string) error {
		_, err := h.sup.Create(ctx, orchestrator.CreateInstance{InstanceID: id, MapID: "frontier", Image: image, Cold: true})
		return err
	}
	first := h.deployment + "-alt1"
	if err := create(first, alt); err != nil {
		t.Fatal(err)
	}
	inst := h.waitState(first, orchestrator.StateReady, 30*time.Second)
	info := h.inspect(inst.ContainerID)
	if info.Config.Image != alt || info.Config.Labels[docker.LabelImage] != alt || inst.Image != alt {
		t.Fatalf("%s runs %q labelled %q (instance says %q), want %s", first, info.Config.Image, info.Config.Labels[docker.LabelImage], inst.Image, alt)
	}
	if d, _ := h.sup.Instance(def); d.Image != dockertest.MapImage() || h.inspect(d.ContainerID).Config.Labels[docker.LabelImage] != dockertest.MapImage() {
		t.Fatalf("the default map %+v does not run and show the default image", d)
	}
	if got := testutil.ToFloat64(h.sup.Metrics.ImageInstances.WithLabelValues(alt, string(orchestrator.StateReady))); got != 1 {
		t.Fatalf("ready maps of %s: %v, want 1", alt, got)
	}

	t.Run("PoolSpareOfTheSecondImage", func(t *testing.T) {
		var spare string
		h.waitFor("a warm-pool spare of "+alt, 30*time.Second, func() bool {
			st := h.sup.Pool()
			for _, is := range st.Images {
				if is.Image == alt && is.Ready == 1 {
					list := h.labelled(docker.LabelPool, docker.LabelImage+"="+alt)
					if len(list) == 1 {
						spare = list[0].ID
						return true
					}
				}
			}
			return false
		})
		second := h.deployment + "-alt2"
		if _, err := h.sup.Create(ctx, orchestrator.CreateInstance{InstanceID: second, MapID: "frontier", Image: alt}); err != nil {
			t.Fatal(err)
		}
		got, err := h.sup.Acquire(ctx, second)
		if err != nil {
			t.Fatal(err)
		}
		if got.ContainerID != spare || got.Image != alt {
			t.Fatalf("%s %+v, want the %s spare %s", second, got, alt, spare[:12])
		}
	})

	t.Run("ErrImageNotAllowed", func(t *testing.T) {
		evil := h.deployment + "-evil"
		err := create(evil, "evil/miner:1")
		if apierr.Code(err) != apierr.EIMAGENOTALLOWED {
			t.Fatalf("create with an image the host does not allow: %v, want image_not_allowed", err)
		}
		if list := h.labelled(docker.LabelInstance + "=" + evil); len(list) != 0 {
			t.Fatalf("containers %v were created for a refused image", list)
		}
	})

	t.Run("ImageMissingUntilRestartedOnceItExists", func(t *testing.T) {
		ghost := h.deployment + "-later"
		if err := create(ghost, later); err != nil {
			t.Fatal(err)
		}
		got := h.waitState(ghost, orchestrator.StateImageMissing, 30*time.Second)
		if got.Restarts != 0 || got.ContainerID != "" || !strings.Contains(got.Reason, "missing on the engine") || got.Image != later {
			t.Fatalf("%s %+v, want image_missing, no restart, no container", ghost, got)
		}
		// It stays there while the default map beats three more times (every 300 ms):
		// no retry, no restart, no quarantine.
		beats := h.heartbeats(def)
		h.waitFor("three heartbeats of the default map", 10*time.Second, func() bool { return h.heartbeats(def) >= beats+3 })
		if got, _ := h.sup.Instance(ghost); got.State != orchestrator.StateImageMissing || got.Restarts != 0 {
			t.Fatalf("%s left image_missing on its own: %+v", ghost, got)
		}
		if h.sawTransition(ghost, orchestrator.StateRestarting, "") || h.sawTransition(ghost, orchestrator.StateQuarantined, "") {
			t.Fatalf("%s was restarted or quarantined", ghost)
		}
		if list := h.labelled(docker.LabelInstance + "=" + ghost); len(list) != 0 {
			t.Fatalf("containers %v left behind by a missing image", list)
		}

		dockertest.TagImage(t, h.cli, dockertest.MapImage(), later)
		if err := h.sup.Restart(ctx, ghost); err != nil {
			t.Fatal(err)
		}
		got = h.waitState(ghost, orchestrator.StateReady, 30*time.Second)
		if img := h.inspect(got.ContainerID).Config.Image; img != later || got.Restarts != 0 {
			t.Fatalf("%s after its image exists: %+v running %q", ghost, got, img)
		}
	})
}
