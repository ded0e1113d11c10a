package sqlite_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
)

func TestDB_Instances(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	put := func(w orchestrator.WantedInstance) {
		t.Helper()
		if err := db.PutInstance(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	put(orchestrator.WantedInstance{ID: "b-1", MapID: "forest", Config: json.RawMessage(`{"seed":7}`), Status: orchestrator.StatusRunning})
	put(orchestrator.WantedInstance{ID: "a-1", MapID: "default", Status: orchestrator.StatusRunning})
	put(orchestrator.WantedInstance{ID: "b-1", MapID: "forest", Config: json.RawMessage(`{"seed":8}`), Image: "studio/forest:2",
		Env: []string{"MAP_FAULT_ALLOCATE_ON_SIGUSR1=true"}, Status: orchestrator.StatusStopped})

	got, err := db.ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "a-1" || got[1].ID != "b-1" {
		t.Fatalf("instances %+v, want a-1 and b-1 in order", got)
	}
	if got[1].Status != orchestrator.StatusStopped || string(got[1].Config) != `{"seed":8}` || len(got[0].Config) != 0 {
		t.Fatalf("upsert not applied: %+v", got)
	}
	// The image is kept as named; none stays none (the host's default at each start).
	if got[1].Image != "studio/forest:2" || got[0].Image != "" {
		t.Fatalf("images %q and %q, want studio/forest:2 and none", got[1].Image, got[0].Image)
	}
	// A test's fault switches are kept with the instance, so a restart after an
	// orchestrator restart runs with them too.
	if len(got[1].Env) != 1 || got[1].Env[0] != "MAP_FAULT_ALLOCATE_ON_SIGUSR1=true" || len(got[0].Env) != 0 {
		t.Fatalf("env %q and %q, want the fault switch and none", got[1].Env, got[0].Env)
	}
	if err := db.DeleteInstance(ctx, "b-1"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteInstance(ctx, "missing"); err != nil {
		t.Fatalf("delete of a missing instance: %v", err)
	}
	if got, _ := db.ListInstances(ctx); len(got) != 1 {
		t.Fatalf("after delete: %+v", got)
	}
}

// TestDB_InstanceRestarts checks that an instance's restart count survives reopening the
// database (an orchestrator restart), only grows whatever order its writes arrive in,
// and is kept when the instance's status is written again.
func TestDB_InstanceRestarts(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mapyard.db")
	db := sqlite.NewDB(path)
	if err := db.Open(); err != nil {
		t.Fatal(err)
	}
	w := orchestrator.WantedInstance{ID: "a-1", MapID: "default", Status: orchestrator.StatusRunning}
	if err := db.PutInstance(ctx, w); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 3, 2} { // the write of 2 arrives after the write of 3
		if err := db.SetInstanceRestarts(ctx, "a-1", n); err != nil {
			t.Fatal(err)
		}
	}
	w.Status = orchestrator.StatusStopped
	if err := db.PutInstance(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := db.SetInstanceRestarts(ctx, "missing", 1); err != nil {
		t.Fatalf("restarts of a missing instance: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	got, err := MustOpenDBAt(t, path).ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Restarts != 3 || got[0].Status != orchestrator.StatusStopped {
		t.Fatalf("after reopening: %+v, want a-1 stopped with 3 restarts", got)
	}
}
