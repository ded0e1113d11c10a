package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// fakeOrch is a hand-written orchestrator for Spread: the first join of an authKey
// names the default map with a ticket naming its character, a join after a state was
// saved names the saved instance (unless stuck, as when that instance is not ready)
// with the ticket the fake map accepts, redeem grants epoch 1, and the saved character
// states are kept.
type fakeOrch struct {
	srv   *httptest.Server
	stuck bool

	mu    sync.Mutex
	saved map[string]map[string]any // character payload by character id
}

func newFakeOrch(t *testing.T, stuck bool) *fakeOrch {
	o := &fakeOrch{stuck: stuck, saved: map[string]map[string]any{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/join", func(w http.ResponseWriter, r *http.Request) {
		var body struct{ AuthKey string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		ch := "c-" + body.AuthKey
		o.mu.Lock()
		defer o.mu.Unlock()
		tok, mapID, inst := "t-"+ch, "default", "default-1"
		if st, ok := o.saved[ch]; ok {
			tok = "good"
			if !o.stuck {
				mapID, inst = st["mapId"].(string), st["instanceId"].(string)
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ticket": tok, "characterId": ch, "mapId": mapID,
			"instanceId": inst, "ws": "/maps/" + inst + "/ws"})
	})
	mux.HandleFunc("POST /orch/redeem", func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Token string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "join", "characterId": strings.TrimPrefix(body.Token, "t-"), "epoch": 1})
	})
	mux.HandleFunc("POST /orch/persist-snapshot", func(w http.ResponseWriter, r *http.Request) {
		var push struct {
			Partition string
			Envelope  struct{ Payload map[string]any }
		}
		if err := json.NewDecoder(r.Body).Decode(&push); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		id, _ := record.CharacterOfPartition(push.Partition)
		o.saved[id] = push.Envelope.Payload
		_ = json.NewEncoder(w).Encode(map[string]bool{"accepted": true})
	})
	o.srv = httptest.NewServer(mux)
	t.Cleanup(o.srv.Close)
	return o
}

func TestSpreadInto(t *testing.T) {
	t.Run("SavesOnTheInstanceAndJoinsThere", func(t *testing.T) {
		o, m := newFakeOrch(t, false), newFakeMap(t, "w1")
		s := &client.Swarm{JoinURL: o.srv.URL, MapURL: m.url(), N: 3, Seed: 1,
			Spread: &client.Spread{ControlURL: o.srv.URL, Secret: "s", Width: 100, Height: 50, IntoMap: "w1", IntoInstance: "w1-1"}}
		if err := s.Connect(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		if len(s.Bots()) != 3 {
			t.Fatalf("%d bots connected, want 3", len(s.Bots()))
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		if len(o.saved) != 3 {
			t.Fatalf("%d characters saved, want 3", len(o.saved))
		}
		for ch, st := range o.saved {
			x, y := st["x"].(float64), st["y"].(float64)
			if st["mapId"] != "w1" || st["instanceId"] != "w1-1" || x < 0 || x > 100 || y < 0 || y > 50 {
				t.Errorf("%s saved as %v, want on w1/w1-1 inside 100×50", ch, st)
			}
		}
	})
	t.Run("RefusesAJoinElsewhere", func(t *testing.T) {
		o, m := newFakeOrch(t, true), newFakeMap(t, "default")
		s := &client.Swarm{JoinURL: o.srv.URL, MapURL: m.url(), N: 1, Seed: 1,
			Spread: &client.Spread{ControlURL: o.srv.URL, Secret: "s", Width: 100, Height: 100, IntoMap: "w1", IntoInstance: "w1-1"}}
		err := s.Connect(context.Background())
		if err == nil {
			s.Close()
			t.Fatal("the bot joined the default map, want an error naming w1-1")
		}
		if !strings.Contains(err.Error(), `not to "w1-1"`) {
			t.Fatalf("error %q does not say the bot went elsewhere", err)
		}
	})
}
