package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/routetable"
	"github.com/mapyard/mapyard/orchestrator"
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

func (m *creatingMaps) Settle(_ context.Context, id string) (orchestrator.Instance, error) {
	return orchestrator.Instance{ID: id, State: orchestrator.StateReady}, nil
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
		// A map without a template and no config: the answer says what to send.
		var e struct {
			Error struct{ Code, Message string }
		}
		testutil.PostJSON(t, s.ControlURL()+httpapi.PathAdminMaps, secret,
			`{"instanceId":"forest-2","mapId":"forest"}`, http.StatusBadRequest, &e)
		if e.Error.Code != "bad_request" || !strings.Contains(e.Error.Message, `"config": {"seed": 7}`) {
			t.Fatalf("a map without a template or config: %+v, want bad_request saying to give a config", e.Error)
		}
	})
}

// TestEdgeCredentialOpensEdgeRoutesOnly checks the edge's own credential: the route
// table and join forwarding take it, the admin API and metrics refuse it, and a map's
// credential opens neither edge route.
func TestEdgeCredentialOpensEdgeRoutesOnly(t *testing.T) {
	s, _ := MustOpenServer(t)
	edgeCred := testutil.Root(t, secret).EdgeCredential()
	testutil.GetJSON(t, s.ControlURL()+routetable.PathRoutes, edgeCred, http.StatusOK, nil)
	testutil.PostJSON(t, s.ControlURL()+public.PathJoin, edgeCred, `{}`, http.StatusOK, nil)
	testutil.GetJSON(t, s.ControlURL()+httpapi.PathAdminMaps, edgeCred, http.StatusUnauthorized, nil)
	testutil.PostJSON(t, s.ControlURL()+httpapi.PathAdminMaps, edgeCred, `{"instanceId":"x-1","mapId":"frontier"}`, http.StatusUnauthorized, nil)
	testutil.GetJSON(t, s.ControlURL()+routetable.PathRoutes, as(t, "default-1"), http.StatusUnauthorized, nil)
	testutil.PostJSON(t, s.ControlURL()+public.PathJoin, as(t, "default-1"), `{}`, http.StatusUnauthorized, nil)
	testutil.GetJSON(t, s.ControlURL()+routetable.PathRoutes, secret, http.StatusOK, nil)
}

// TestAdminCreateNamesItsImage: an admin create names its map's image in the request
// or in its config; the instance record keeps it, and the config the map is handed
// does not carry it.
func TestAdminCreateNamesItsImage(t *testing.T) {
	maps := &creatingMaps{readyMaps: readyMaps{ids: map[string]bool{"default-1": true}}}
	s, _ := MustOpenServer(t, func(s *httpapi.Server) { s.Maps = maps })
	for i, body := range []string{
		`{"instanceId":"dun-1","mapId":"forest","image":"studio/dungeon:1","config":{"seed":7}}`,
		`{"instanceId":"dun-2","mapId":"forest","config":{"seed":7,"image":"studio/dungeon:1"}}`,
		`{"instanceId":"dun-3","mapId":"forest","image":"studio/dungeon:1","config":{"seed":7,"image":"studio/dungeon:1"}}`,
	} {
		testutil.PostJSON(t, s.ControlURL()+httpapi.PathAdminMaps, secret, body, http.StatusCreated, nil)
		r := maps.created[i]
		if r.Image != "studio/dungeon:1" {
			t.Fatalf("%s: created with image %q", body, r.Image)
		}
		if strings.Contains(string(r.Config), `"image"`) {
			t.Fatalf("%s: the map's config carries the image: %s", body, r.Config)
		}
		if c, err := mapgen.Resolve(r.InstanceID, "forest", r.Config); err != nil || c.Seed != 7 {
			t.Fatalf("%s: stored config %s: %v", body, r.Config, err)
		}
	}
	t.Run("NoneNamed", func(t *testing.T) {
		testutil.PostJSON(t, s.ControlURL()+httpapi.PathAdminMaps, secret, `{"instanceId":"f-1","mapId":"frontier"}`, http.StatusCreated, nil)
		if r := maps.created[len(maps.created)-1]; r.Image != "" {
			t.Fatalf("a create naming no image asks for %q, want the host's default (none)", r.Image)
		}
	})
	t.Run("ErrBadRequest", func(t *testing.T) {
		n := len(maps.created)
		for _, body := range []string{
			`{"instanceId":"x-1","mapId":"forest","image":"studio/a:1","config":{"seed":7,"image":"studio/b:1"}}`,
			`{"instanceId":"x-1","mapId":"forest","image":"studio dungeon","config":{"seed":7}}`,
			`{"instanceId":"x-1","mapId":"forest","config":{"seed":7,"image":"/dungeon"}}`,
		} {
			testutil.PostJSON(t, s.ControlURL()+httpapi.PathAdminMaps, secret, body, http.StatusBadRequest, nil)
		}
		if len(maps.created) != n {
			t.Fatalf("a refused create reached the supervisor")
		}
	})
}
