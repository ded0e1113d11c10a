package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/mapyard/mapyard/mapserver/mapgen"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/edgeapi"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// creatingMaps is readyMaps that records what the admin API asks it to create.
type creatingMaps struct {
	readyMaps
	created []orchestrator.CreateInstance
}

func (m *creatingMaps) Create(_ context.Context, r orchestrator.CreateInstance) (orchestrator.Instance, error) {
	m.created = append(m.created, r)
	return orchestrator.Instance{ID: r.InstanceID, MapID: r.MapID, State: orchestrator.StateStarting}, nil
}

// TestAdminCreateCompletesPartialConfig checks the README's example: a config holding
// only a seed is completed from the map's template defaults, answered 201, and the
// instance is created with the full config the map server reads as it is.
func TestAdminCreateCompletesPartialConfig(t *testing.T) {
	maps := &creatingMaps{readyMaps: readyMaps{ids: map[string]bool{"default-1": true}}}
	s, _ := MustOpenServer(t, func(s *httpapi.Server) { s.Maps = maps })
	var inst orchestrator.Instance
	testutil.PostJSON(t, s.ControlURL()+httpapi.PathAdminMaps, secret,
		`{"instanceId":"forest-1","mapId":"forest","config":{"seed":7}}`, http.StatusCreated, &inst)
	if inst.ID != "forest-1" || len(maps.created) != 1 {
		t.Fatalf("answer %+v, created %d", inst, len(maps.created))
	}
	c, err := mapgen.Resolve("forest-1", "forest", maps.created[0].Config)
	if err != nil {
		t.Fatalf("stored config is not complete: %v", err)
	}
	if c.Seed != 7 {
		t.Fatalf("seed %d, want 7", c.Seed)
	}
	t.Run("ErrBadRequest", func(t *testing.T) {
		testutil.PostJSON(t, s.ControlURL()+httpapi.PathAdminMaps, secret,
			`{"instanceId":"forest-2","mapId":"forest","config":{"seed":-3}}`, http.StatusBadRequest, nil)
		testutil.PostJSON(t, s.ControlURL()+httpapi.PathAdminMaps, secret,
			`{"instanceId":"forest-2","mapId":"forest"}`, http.StatusBadRequest, nil)
	})
}

// TestEdgeCredentialOpensEdgeRoutesOnly checks the edge's own credential: the route
// table and join forwarding take it, the admin API and metrics refuse it, and a map's
// credential opens neither edge route.
func TestEdgeCredentialOpensEdgeRoutesOnly(t *testing.T) {
	s, _ := MustOpenServer(t)
	edgeCred := testutil.Root(t, secret).EdgeCredential()
	testutil.GetJSON(t, s.ControlURL()+edgeapi.PathRoutes, edgeCred, http.StatusOK, nil)
	testutil.PostJSON(t, s.ControlURL()+edgeapi.PathJoin, edgeCred, `{}`, http.StatusOK, nil)
	testutil.GetJSON(t, s.ControlURL()+httpapi.PathAdminMaps, edgeCred, http.StatusUnauthorized, nil)
	testutil.PostJSON(t, s.ControlURL()+httpapi.PathAdminMaps, edgeCred, `{"instanceId":"x-1","mapId":"frontier"}`, http.StatusUnauthorized, nil)
	testutil.GetJSON(t, s.ControlURL()+edgeapi.PathRoutes, as(t, "default-1"), http.StatusUnauthorized, nil)
	testutil.PostJSON(t, s.ControlURL()+edgeapi.PathJoin, as(t, "default-1"), `{}`, http.StatusUnauthorized, nil)
	testutil.GetJSON(t, s.ControlURL()+edgeapi.PathRoutes, secret, http.StatusOK, nil)
}
