package main

// The soak's end checks (see soak_test.go).

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// finish ends the run (the players leave, the orchestrator stops, the kit is torn
// down), checks what must hold after it and writes the report.
func (s *soak) finish(t *testing.T) {
	var checks []string
	check := func(ok bool, format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		if !ok {
			t.Errorf("soak: %s", line)
			line = "**FAILED**: " + line
		}
		checks = append(checks, line)
	}

	// The players: the bots' connections, resumes and rejoins.
	var bots, ended int
	var resumes, rejoins int64
	for _, sw := range s.swarms {
		for _, c := range sw.Bots() {
			bots++
			st := c.Stats()
			resumes, rejoins = resumes+st.Resumes, rejoins+st.Rejoins
			select {
			case <-c.Done():
				ended++
			default:
			}
		}
	}
	check(ended == 0, "W1 bots: %d of %d still playing at the end; %d resumes and %d joins anew after a fault broke their socket",
		bots-ended, bots, resumes, rejoins)
	check(s.resumed > 0, "dropped sockets: %d broken on purpose, %d resumed as the same character", s.drops, s.resumed)
	check(len(s.refusals) == 0, "joins and leaves: %d joins through the edge; refused outside a fault's window (joins and resumes): %d %v",
		s.joins, len(s.refusals), s.refusals)
	trips, walkErrs := 0, 0
	for _, w := range s.walkers {
		trips, walkErrs = trips+w.trips, walkErrs+w.errs
	}
	check(trips >= 2*len(s.walkers), "portals: %d trips between %s and %s by %d walkers (%d walks cut short by a fault)",
		trips, s.loot.InstanceID, s.hall.InstanceID, len(s.walkers), walkErrs)

	// Every saved character stands where its last push put it once it left.
	type place struct {
		character, instance string
		x, y                float64
	}
	var left []place
	for _, p := range s.pickers {
		p.c.Close()
		left = append(left, place{p.character, p.lastMap, p.lastX, p.lastY})
	}
	for _, w := range s.walkers {
		w.c.Close()
		left = append(left, place{w.character, w.lastMap, w.lastX, w.lastY})
	}
	s.traders.a.c.Close()
	s.traders.b.c.Close()
	for _, sw := range s.swarms {
		sw.Close()
	}
	saved := 0
	for _, pl := range left {
		deadline := time.Now().Add(15 * time.Second)
		for {
			st := savedState(t, s.k.dbPath, pl.character)
			if st != nil && st.InstanceID == pl.instance && near(st.X, st.Y, pl.x, pl.y, 1.5) {
				saved++
				break
			}
			if time.Now().After(deadline) {
				t.Logf("soak: %s left %s at (%.1f, %.1f), saved as %+v", pl.character, pl.instance, pl.x, pl.y, st)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	stranded := 0
	for _, pl := range left {
		if pl.instance != s.loot.InstanceID && pl.instance != s.hall.InstanceID {
			stranded++
		}
	}
	check(saved == len(left), "saved characters: %d of %d stand where they left (within 1.5 units, on their map); %d came back on another map after a fault",
		saved, len(left), stranded)

	// The deployment holds the containers of its maps and nothing else.
	var maps struct{ Instances []orchestrator.Instance }
	testutil.GetJSON(t, s.control+httpapi.PathAdminMaps, s.k.secret, http.StatusOK, &maps)
	want := map[string]bool{}
	for _, m := range maps.Instances {
		if m.ContainerID != "" {
			want[m.ContainerID] = true
		}
	}
	list, err := s.k.cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", docker.LabelDeployment+"="+s.k.deployment))})
	if err != nil {
		t.Fatal(err)
	}
	var orphans []string
	for _, c := range list {
		if !want[c.ID] {
			orphans = append(orphans, c.Names[0]+" ("+c.State+")")
		}
	}
	check(len(orphans) == 0, "containers: %d of the deployment, each a map's current one; orphans %v", len(list), orphans)
	check(s.networks(context.Background()) == 1, "networks: the map network %s exists once", s.network())

	// A sample once the players left, then the orchestrator stops (SIGTERM) and the file is checked as
	// the next start would find it.
	after := s.takeSample(context.Background())
	s.after = &after
	if err := s.k.orch.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	s.k.orch.wait(30 * time.Second)
	s.checkDB(t, check)

	// Torn down, the deployment leaves nothing: no container, and the network is free.
	dockertest.RemoveDeployment(t, s.k.cli, s.k.deployment)
	left2 := s.containers(context.Background())
	nw, err := s.k.cli.NetworkInspect(context.Background(), s.network(), network.InspectOptions{})
	attached := len(nw.Containers)
	if err == nil {
		err = s.k.cli.NetworkRemove(context.Background(), s.network())
	}
	check(left2 == 0 && attached == 0 && err == nil, "torn down: %d containers of the deployment left, %d attached to its network, network removed (%v)", left2, attached, err)

	dir, err := s.report(checks)
	if err != nil {
		t.Errorf("soak report: %v", err)
	}
	for _, c := range checks {
		t.Logf("soak: %s", c)
	}
	t.Logf("soak: report in %s", dir)
}

// checkDB holds the stopped orchestrator's database to the soak's rules: integrity,
// and every acknowledged pickup held exactly once by its picker with exactly one
// critical event, nothing held without a pickup sent, nothing both held and on the
// ground.
func (s *soak) checkDB(t *testing.T, check func(bool, string, ...any)) {
	rw, err := sql.Open("sqlite", sqlite.DSN(s.k.dbPath, false))
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	var integrity string
	err = rw.QueryRow(`PRAGMA integrity_check`).Scan(&integrity)
	check(err == nil && integrity == "ok", "PRAGMA integrity_check: %s (%v)", integrity, err)

	events := pickupEvents(t, rw, s.loot.InstanceID)
	acked, sent, bad := 0, map[string]string{}, 0
	for _, p := range s.pickers {
		p.mu.Lock()
		for id := range p.sent {
			sent[id] = p.character
		}
		for id := range p.acked {
			acked++
			if held := heldBy(t, rw, id); len(held) != 1 || held[0] != p.character || events[id] != 1 {
				bad++
				t.Logf("soak: acknowledged pickup of %s by %s: held by %v, %d critical events", id, p.character, held, events[id])
			}
		}
		p.mu.Unlock()
	}
	unreachable := 0
	for _, p := range s.pickers {
		unreachable += p.unreachable
	}
	check(acked > 0 && bad == 0, "pickups: %d acknowledged, %d not held exactly once by their picker with one critical event (%d items left where the picker could not walk to)",
		acked, bad, unreachable)
	var both int
	err = rw.QueryRow(`SELECT count(*) FROM inventory_items WHERE owner_character_id IS NOT NULL AND location_instance_id IS NOT NULL`).Scan(&both)
	check(err == nil && both == 0, "items both held and on the ground: %d (%v)", both, err)
	s.checkTrades(t, rw, check)
	unsent := 0
	for _, it := range s.ground {
		if it.ID == s.traders.item.ID {
			continue // held by a trader without a pickup of its own sent: checked above
		}
		var owner sql.NullString
		if err := rw.QueryRow(`SELECT owner_character_id FROM inventory_items WHERE item_id = ?`, it.ID).Scan(&owner); err != nil {
			t.Fatalf("item %s: %v", it.ID, err)
		}
		if owner.Valid && sent[it.ID] != owner.String {
			unsent++
		}
	}
	check(unsent == 0, "items held without a pickup sent by their holder: %d of the loot map's %d", unsent, len(s.ground))
}
