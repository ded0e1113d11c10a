package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/kernel/routetable"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/admission"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/keys"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

const secret = "test-secret-0123456789abcdef"

// readyMaps is a hand-written fake supervisor with every listed instance ready. The
// supervisor methods these tests do not reach are left to the nil embedded interface.
type readyMaps struct {
	orchestrator.Maps
	ids map[string]bool
}

func (m readyMaps) Instance(id string) (orchestrator.Instance, error) {
	if !m.ids[id] {
		return orchestrator.Instance{}, apierr.Errorf(apierr.ENOTFOUND, "no %q", id)
	}
	return orchestrator.Instance{ID: id, MapID: strings.TrimSuffix(id, "-1"), State: orchestrator.StateReady}, nil
}
func (m readyMaps) Gate(id string) (orchestrator.Instance, error) {
	return m.Acquire(context.Background(), id)
}
func (m readyMaps) Acquire(ctx context.Context, id string) (orchestrator.Instance, error) {
	inst, err := m.Instance(id)
	if err != nil {
		return inst, apierr.Errorf(apierr.EMAPUNAVAILABLE, "no %q", id)
	}
	return inst, nil
}
func (m readyMaps) Ready() bool { return true }

// Instances lists the ready instances, for the route table.
func (m readyMaps) Instances() []orchestrator.Instance {
	var out []orchestrator.Instance
	for id := range m.ids {
		inst, _ := m.Instance(id)
		out = append(out, inst)
	}
	return out
}

// MustOpenServer serves a real admission service over a real SQLite store, after the
// optional set-up functions changed the server.
func MustOpenServer(tb testing.TB, setup ...func(*httpapi.Server)) (*httpapi.Server, *sqlite.DB) {
	tb.Helper()
	return MustOpenServerLog(tb, slog.New(slog.NewTextHandler(io.Discard, nil)), setup...)
}

// MustOpenServerLog is MustOpenServer logging to log.
func MustOpenServerLog(tb testing.TB, log *slog.Logger, setup ...func(*httpapi.Server)) (*httpapi.Server, *sqlite.DB) {
	tb.Helper()
	db := sqlite.NewDB(filepath.Join(tb.TempDir(), "mapyard.db"))
	if err := db.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	maps := readyMaps{ids: map[string]bool{"default-1": true, "frontier-1": true}}
	adm := admission.NewService(testutil.Root(tb, secret), db, maps, "default-1", log)
	s := httpapi.NewServer(maps, adm, db, testutil.Root(tb, secret), log)
	s.PublicAddr, s.ControlAddr = "127.0.0.1:0", "127.0.0.1:0"
	s.ControlExtraIPs = []string{"127.0.0.2"} // stands in for the map network's gateway
	for _, f := range setup {
		f(s)
	}
	if err := s.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close(context.Background()) })
	return s, db
}

// as returns the map credential of the container of instance (generation "t1").
func as(tb testing.TB, instance string) string {
	tb.Helper()
	c, err := testutil.Root(tb, secret).MapCredential(keys.Identity{InstanceID: instance, Generation: "t1"})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// TestPersistSnapshot_Lease checks that a character partition is accepted only from the
// map holding the character's lease at the quoted epoch.
func TestPersistSnapshot_Lease(t *testing.T) {
	s, db := MustOpenServer(t)
	var j public.JoinResponse
	testutil.PostJSON(t, s.PublicURL()+public.PathJoin, "", public.JoinRequest{AuthKey: "Zq3v9LrT0pXw2YbN5cHs8KdA"}, http.StatusOK, &j)
	var r mapcontract.RedeemResult
	testutil.PostJSON(t, s.ControlURL()+mapcontract.PathRedeem, as(t, "default-1"), mapcontract.RedeemRequest{InstanceID: "default-1", Token: j.Ticket}, http.StatusOK, &r)

	payload := json.RawMessage(`{"mapId":"default","instanceId":"default-1","x":1,"y":2}`)
	snap := mapcontract.PersistSnapshot{
		InstanceID: "default-1", Partition: record.CharacterPartition(r.CharacterID), Revision: 1, Epoch: r.Epoch,
		Envelope: record.NewSnapshotEnvelope("sim-1", 10, 0, payload),
	}
	var a mapcontract.PersistSnapshotAnswer
	testutil.PostJSON(t, s.ControlURL()+mapcontract.PathPersistSnapshot, as(t, "default-1"), snap, http.StatusOK, &a)
	if !a.Accepted {
		t.Fatal("snapshot from the lease holder not accepted")
	}
	t.Run("ErrConflictStaleEpoch", func(t *testing.T) {
		stale := snap
		stale.Revision, stale.Epoch = 2, r.Epoch-1
		var e httpkit.ErrorResponse
		testutil.PostJSON(t, s.ControlURL()+mapcontract.PathPersistSnapshot, as(t, "default-1"), stale, http.StatusConflict, &e)
		if e.Error.Code != apierr.ECONFLICT {
			t.Fatalf("code %q", e.Error.Code)
		}
	})
	t.Run("ErrForbiddenOtherMap", func(t *testing.T) {
		other := snap
		other.InstanceID, other.Revision = "frontier-1", 3
		testutil.PostJSON(t, s.ControlURL()+mapcontract.PathPersistSnapshot, as(t, "frontier-1"), other, http.StatusForbidden, nil)
	})
	t.Run("ErrForbiddenActingForAnother", func(t *testing.T) {
		testutil.PostJSON(t, s.ControlURL()+mapcontract.PathPersistSnapshot, as(t, "frontier-1"), snap, http.StatusForbidden, nil)
	})
	t.Run("ErrHashMismatch", func(t *testing.T) {
		bad := snap
		bad.Revision = 4
		bad.Envelope.PayloadHash = strings.Repeat("0", 64)
		var e httpkit.ErrorResponse
		testutil.PostJSON(t, s.ControlURL()+mapcontract.PathPersistSnapshot, as(t, "default-1"), bad, http.StatusBadRequest, &e)
		if e.Error.Code != apierr.EHASHMISMATCH {
			t.Fatalf("code %q", e.Error.Code)
		}
	})
	if got, err := db.Snapshot(context.Background(), "default-1", snap.Partition); err != nil || got.Revision != 1 {
		t.Fatalf("stored snapshot %+v %v, want revision 1 only", got, err)
	}
}

// TestGatewayServesMapRoutesOnly checks that the control port as map containers reach it
// (the gateway address) refuses the admin API and metrics, with a map's credential or
// even with the root secret: there, every route but the map routes is unknown.
func TestGatewayServesMapRoutesOnly(t *testing.T) {
	s, _ := MustOpenServer(t)
	gw := "http://127.0.0.2:" + strconv.Itoa(s.ControlPort())
	for _, path := range []string{httpapi.PathAdminMaps, httpkit.PathMetrics} {
		for _, cred := range []string{secret, as(t, "default-1")} {
			req, _ := http.NewRequest(http.MethodGet, gw+path, nil)
			req.Header.Set(httpkit.SecretHeader, cred)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("GET %s on the gateway: %d, want 404 or 401", path, resp.StatusCode)
			}
		}
	}
	var ev record.CriticalAck
	testutil.PostJSON(t, gw+mapcontract.PathPersistCritical, as(t, "default-1"), record.CriticalEvent{EventID: "gw-1", InstanceID: "default-1", Kind: "note", Payload: json.RawMessage(`{}`)}, http.StatusOK, &ev)
}

// TestGatewayServesTheEdgeOnSwarm checks EdgeOnExtraIPs (Swarm, where the edge reaches
// the orchestrator on the maps' overlay): the gateway address answers the edge's route
// watch with the edge credential, refuses it with a map's, and still knows no admin
// route; without the option the edge's routes are unknown there.
func TestGatewayServesTheEdgeOnSwarm(t *testing.T) {
	get := func(url, cred string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set(httpkit.SecretHeader, cred)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	edgeCred := testutil.Root(t, secret).EdgeCredential()
	s, _ := MustOpenServer(t, func(s *httpapi.Server) { s.EdgeOnExtraIPs = true })
	gw := "http://127.0.0.2:" + strconv.Itoa(s.ControlPort())
	if code := get(gw+routetable.PathRoutes+"?waitMs=0", edgeCred); code != http.StatusOK {
		t.Fatalf("the route watch with the edge credential on the gateway: %d, want 200", code)
	}
	if code := get(gw+routetable.PathRoutes+"?waitMs=0", as(t, "default-1")); code != http.StatusUnauthorized {
		t.Fatalf("the route watch with a map's credential: %d, want 401", code)
	}
	if code := get(gw+httpapi.PathAdminMaps, secret); code != http.StatusNotFound && code != http.StatusUnauthorized {
		t.Fatalf("GET %s on the gateway with the root: %d, want 404 or 401", httpapi.PathAdminMaps, code)
	}
	plain, _ := MustOpenServer(t)
	gw = "http://127.0.0.2:" + strconv.Itoa(plain.ControlPort())
	if code := get(gw+routetable.PathRoutes+"?waitMs=0", edgeCred); code == http.StatusOK {
		t.Fatal("the route watch answers on the gateway of one engine")
	}
}

func TestPersistCritical(t *testing.T) {
	s, _ := MustOpenServer(t)
	ev := record.CriticalEvent{EventID: "ev-1", InstanceID: "default-1", Kind: "quest_done", Payload: json.RawMessage(`{}`)}
	var a, b record.CriticalAck
	testutil.PostJSON(t, s.ControlURL()+mapcontract.PathPersistCritical, as(t, "default-1"), ev, http.StatusOK, &a)
	testutil.PostJSON(t, s.ControlURL()+mapcontract.PathPersistCritical, as(t, "default-1"), ev, http.StatusOK, &b)
	if a.Seq == 0 || b.Seq != a.Seq || !b.Duplicate {
		t.Fatalf("acks %+v then %+v: a retry must get the first ack", a, b)
	}
}
