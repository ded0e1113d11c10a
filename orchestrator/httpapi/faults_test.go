package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestFaults_ControlDelay checks the slow-orchestrator switch: without
// EnableFaults the route does not exist; with it, a delay set through the admin route
// holds a map's call at least that long, admin calls are not held, a delay out of
// bounds is refused, and 0 turns it off.
func TestFaults_ControlDelay(t *testing.T) {
	plain, _ := MustOpenServer(t)
	testutil.Do(t, http.MethodPut, plain.ControlURL()+httpapi.PathAdminFaults, secret, httpapi.FaultsRequest{ControlDelayMs: 100}, http.StatusNotFound, nil)

	s, _ := MustOpenServer(t, func(s *httpapi.Server) { s.EnableFaults() })
	faults := s.ControlURL() + httpapi.PathAdminFaults
	testutil.Do(t, http.MethodPut, faults, as(t, "default-1"), httpapi.FaultsRequest{ControlDelayMs: 100}, http.StatusUnauthorized, nil)
	testutil.Do(t, http.MethodPut, faults, secret, httpapi.FaultsRequest{ControlDelayMs: -1}, http.StatusBadRequest, nil)
	testutil.Do(t, http.MethodPut, faults, secret, httpapi.FaultsRequest{ControlDelayMs: 30001}, http.StatusBadRequest, nil)

	const delay = 300 * time.Millisecond
	critical := func(id string) time.Duration {
		start := time.Now()
		testutil.PostJSON(t, s.ControlURL()+mapcontract.PathPersistCritical, as(t, "default-1"),
			record.CriticalEvent{EventID: id, InstanceID: "default-1", Kind: "note", Payload: json.RawMessage(`{}`)}, http.StatusOK, nil)
		return time.Since(start)
	}
	testutil.Do(t, http.MethodPut, faults, secret, httpapi.FaultsRequest{ControlDelayMs: delay.Milliseconds()}, http.StatusOK, nil)
	if took := critical("slow-1"); took < delay {
		t.Fatalf("a map's call with a %s delay answered after %s", delay, took)
	}
	// Admin calls are never held: with a delay of 30 s, turning it off answers well
	// within a client's 10 s, and then a map's call is answered again.
	testutil.Do(t, http.MethodPut, faults, secret, httpapi.FaultsRequest{ControlDelayMs: 30000}, http.StatusOK, nil)
	req, _ := http.NewRequest(http.MethodPut, faults, strings.NewReader(`{"controlDelayMs":0}`))
	req.Header.Set(httpkit.SecretHeader, secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("turning the delay off while it is 30 s: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("turning the delay off: %d", resp.StatusCode)
	}
	critical("slow-2")
}
