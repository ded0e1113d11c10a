package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
)

// TestDeployments_ShareAnEngine runs two kits of different deployments on one Docker
// engine with the same instance ids, as staging beside production would: both default
// maps are default-1, one kit starts frontier-1 through a portal (the default map's portals lead there) and the other through
// the admin API. Every map of both keeps running and every player stays connected, and
// a kill of one deployment's map changes none of the other's containers.
func TestDeployments_ShareAnEngine(t *testing.T) {
	a := newKit(t, "ORCH_DEFAULT_INSTANCE_ID=default-1")
	b := newKit(t, "ORCH_DEFAULT_INSTANCE_ID=default-1")
	const frontier = "frontier-1"

	players := map[string]*client.Client{}
	for name, k := range map[string]*kit{"a": a, "b": b} {
		j := k.join(t, `{}`)
		if j.InstanceID != "default-1" {
			t.Fatalf("kit %s joins into %s, want default-1", name, j.InstanceID)
		}
		players[name+"/default-1"] = k.play(t, j.WS, j.Ticket, client.Options{})
	}

	// Kit a reaches frontier-1 the way a portal does (the map asks for a transfer to
	// map "frontier"); kit b creates it through the admin API.
	cfg, err := mapgen.Template("frontier")
	if err != nil {
		t.Fatal(err)
	}
	w, err := mapgen.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sp := w.Spawns[0]
	players["a/"+frontier] = a.enterAt(t, cfg, float64(sp.X)/100, float64(sp.Y)/100, client.Options{})
	if inst := a.instance(t, frontier); inst.State != orchestrator.StateReady {
		t.Fatalf("kit a's %s is %s after the portal", frontier, inst.State)
	}
	cfg.InstanceID = frontier
	b.createMap(t, cfg)
	players["b/"+frontier] = b.enterAt(t, cfg, float64(sp.X)/100, float64(sp.Y)/100, client.Options{})

	ids := func(k *kit) map[string]string {
		t.Helper()
		list, err := k.cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(
			filters.Arg("label", docker.LabelDeployment+"="+k.deployment))})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, c := range list {
			if c.State != "running" {
				t.Errorf("deployment %s: container %v is %s", k.deployment, c.Names, c.State)
			}
			out[c.Names[0]] = c.ID
		}
		return out
	}
	for _, k := range []*kit{a, b} {
		got := ids(k)
		for _, id := range []string{"default-1", frontier} {
			name := "/" + docker.ContainerName(k.deployment, id)
			if got[name] == "" {
				t.Fatalf("deployment %s has no running %s; its containers: %v", k.deployment, name, got)
			}
			if inst := k.instance(t, id); inst.State != orchestrator.StateReady || got[name] != inst.ContainerID {
				t.Fatalf("deployment %s: %s is %s in container %s, want ready in %s", k.deployment, id, inst.State, inst.ContainerID, got[name])
			}
		}
	}

	connected := func(except string) {
		t.Helper()
		for what, c := range players {
			if what == except {
				continue
			}
			n := c.Stats().Snapshots
			waitUntil(t, what+" still receiving snapshots", func() bool { return c.Stats().Snapshots > n+5 })
			if c.Stats().Dropped {
				t.Fatalf("%s was dropped", what)
			}
		}
	}
	connected("")

	// Kill kit a's frontier-1: a restarts it; not one of b's containers changes.
	before := ids(b)
	if err := a.cli.ContainerKill(context.Background(), a.instance(t, frontier).ContainerID, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	killed := a.instance(t, frontier).ContainerID
	waitFor(t, "kit a's frontier-1 restarted", 60*time.Second, func() bool {
		inst := a.instance(t, frontier)
		return inst.State == orchestrator.StateReady && inst.ContainerID != killed
	})
	after := ids(b)
	if len(after) != len(before) {
		t.Fatalf("kit b's containers changed: before %v, after %v", before, after)
	}
	for name, id := range before {
		if after[name] != id {
			t.Fatalf("kit b's %s changed from %s to %s", name, id, after[name])
		}
	}
	connected("a/" + frontier) // its map was killed: the page would resume it
	waitStatus(t, a.edge.PublicURL()+"/readyz", http.StatusOK, 10*time.Second)
	waitStatus(t, b.edge.PublicURL()+"/readyz", http.StatusOK, 10*time.Second)
}
