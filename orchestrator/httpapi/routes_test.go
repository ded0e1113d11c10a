package httpapi_test

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/routetable"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// changingMaps is a fake supervisor whose instances a test changes.
type changingMaps struct {
	orchestrator.Maps
	mu   sync.Mutex
	inst []orchestrator.Instance
}

func (m *changingMaps) Instances() []orchestrator.Instance {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]orchestrator.Instance(nil), m.inst...)
}
func (m *changingMaps) Ready() bool { return true }

// Gate refuses what is not ready, as the supervisor's gate does.
func (m *changingMaps) Gate(id string) (orchestrator.Instance, error) {
	for _, inst := range m.Instances() {
		switch {
		case inst.ID != id:
		case inst.State == orchestrator.StateQuarantined:
			return inst, apierr.Errorf(apierr.EMAPQUARANTINED, "%q is quarantined", id)
		case inst.State != orchestrator.StateReady:
			return inst, apierr.Errorf(apierr.EMAPUNAVAILABLE, "%q is %s", id, inst.State)
		default:
			return inst, nil
		}
	}
	return orchestrator.Instance{}, apierr.Errorf(apierr.EMAPUNAVAILABLE, "no %q", id)
}

func (m *changingMaps) set(inst ...orchestrator.Instance) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inst = inst
}

func TestRoutes_Watch(t *testing.T) {
	maps := &changingMaps{inst: []orchestrator.Instance{{ID: "default-1", State: orchestrator.StateReady, GamePort: 4001}}}
	s := httpapi.NewServer(maps, nil, nil, testutil.Root(t, secret), slog.New(slog.DiscardHandler))
	s.PublicAddr, s.ControlAddr = "127.0.0.1:0", "127.0.0.1:0"
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	ctx := context.Background()
	c := routetable.NewClient(s.ControlURL(), secret)

	first, err := c.WatchRoutes(ctx, "", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if first.Version == "" || !first.Ready || len(first.Routes) != 1 || first.Routes[0].GamePort != 4001 {
		t.Fatalf("first table %+v", first)
	}
	t.Run("SameTableAfterWait", func(t *testing.T) {
		got, err := c.WatchRoutes(ctx, first.Version, 100*time.Millisecond)
		if err != nil || got.Version != first.Version {
			t.Fatalf("got %+v, %v; want version %s", got, err, first.Version)
		}
	})
	t.Run("ChangeAnswersAtOnce", func(t *testing.T) {
		go func() {
			time.Sleep(50 * time.Millisecond) // the watch is waiting by then, or sees the change at once
			maps.set(orchestrator.Instance{ID: "default-1", State: orchestrator.StateQuarantined})
		}()
		got, err := c.WatchRoutes(ctx, first.Version, 20*time.Second)
		if err != nil || got.Version == first.Version || got.Routes[0].Code != apierr.EMAPQUARANTINED {
			t.Fatalf("got %+v, %v; want the quarantined table", got, err)
		}
	})
	t.Run("ErrEdgeUnauthorized", func(t *testing.T) {
		_, err := routetable.NewClient(s.ControlURL(), "wrong").WatchRoutes(ctx, "", 0)
		if apierr.Code(err) != apierr.EEDGEUNAUTHORIZED {
			t.Fatalf("err %v, want edge_unauthorized", err)
		}
	})
	t.Run("NotOnPublicListener", func(t *testing.T) {
		resp, err := http.Get(s.PublicURL() + routetable.PathRoutes)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("public listener answers the route watch: %d", resp.StatusCode)
		}
	})
}
