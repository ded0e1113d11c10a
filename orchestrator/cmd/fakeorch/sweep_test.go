package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/fake"
	"github.com/mapyard/mapyard/orchestrator/keys"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestFakeOrchestrator_AbortsExpiredTransfers checks that the fake orchestrator runs
// admission's sweeper: a transfer whose token is never redeemed is aborted, and the
// character is free to join again, as with the real orchestrator.
func TestFakeOrchestrator_AbortsExpiredTransfers(t *testing.T) {
	m := &Main{
		Config: Config{RPCConfig: orchestrator.RPCConfig{PublicAddr: "127.0.0.1:0", ControlAddr: "127.0.0.1:0", DefaultInstanceID: "dev-1",
			JoinTicketTTLMS: 10000, TransferTokenTTLMS: 100, LogLevel: "info"}},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if err := m.Run(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })

	// Two maps register; a stand-in answers their start-instance calls.
	maps := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != mapcontract.PathStartInstance {
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(maps.Close)
	u, _ := url.Parse(maps.URL)
	port, _ := strconv.Atoi(u.Port())
	for _, id := range []string{"dev-1", "other-1"} {
		body := fmt.Sprintf(`{"instanceId":%q,"mapId":"default","gamePort":%d,"controlPort":%d}`, id, port, port)
		testutil.PostJSON(t, m.HTTP.ControlURL()+mapcontract.PathMapReady, mapCredential(t, m, id), body, http.StatusOK, nil)
	}

	var j public.JoinResponse
	testutil.PostJSON(t, m.HTTP.PublicURL()+public.PathJoin, "", ``, http.StatusOK, &j)
	var r mapcontract.RedeemResult
	testutil.PostJSON(t, m.HTTP.ControlURL()+mapcontract.PathRedeem, mapCredential(t, m, "dev-1"), `{"instanceId":"dev-1","token":"`+j.Ticket+`"}`, http.StatusOK, &r)
	req := fmt.Sprintf(`{"transferId":"tr-1","characterId":%q,"fromInstanceId":"dev-1","toInstanceId":"other-1","epoch":%d,"state":{"mapId":"default","x":1,"y":1}}`, r.CharacterID, r.Epoch)
	var a mapcontract.TransferAnswer
	testutil.PostJSON(t, m.HTTP.ControlURL()+mapcontract.PathRequestTransfer, mapCredential(t, m, "dev-1"), req, http.StatusOK, &a)

	var state orchestrator.TransferState
	waitFor(t, "the expired transfer to be aborted", func() bool {
		tr, err := m.DB.Transfer(context.Background(), "tr-1")
		if err != nil {
			t.Fatal(err)
		}
		state = tr.State
		return state == orchestrator.TransferAborted
	})
}

// mapCredential is the credential fakeorch prints for a map started by hand as id.
func mapCredential(tb testing.TB, m *Main, id string) string {
	tb.Helper()
	c, err := m.Root.MapCredential(keys.Identity{InstanceID: id, Generation: fake.DevGeneration})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
