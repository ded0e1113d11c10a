// Package faketest runs the fake orchestrator in-process for map server tests: the real
// admission and store over a throwaway SQLite file and a registry of hand-started maps,
// exactly what cmd/fakeorch serves to map developers.
package faketest

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator/admission"
	"github.com/mapyard/mapyard/orchestrator/fake"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/keys"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// Secret is the root secret of every fake orchestrator opened here.
const Secret = "test-secret-0123456789"

// Credentials returns what a map started by hand as instanceID holds against a fake
// orchestrator opened here: its credential towards the orchestrator (MAP_CREDENTIAL)
// and the orchestrator's towards it (MAP_ORCH_CREDENTIAL).
func Credentials(tb testing.TB, instanceID string) (mapCred, orchCred string) {
	tb.Helper()
	id := keys.Identity{InstanceID: instanceID, Generation: fake.DevGeneration}
	root := testutil.Root(tb, Secret)
	mapCred, err := root.MapCredential(id)
	if err != nil {
		tb.Fatal(err)
	}
	if orchCred, err = root.OrchCredential(id); err != nil {
		tb.Fatal(err)
	}
	return mapCred, orchCred
}

// Orch is a fake orchestrator; join tickets target DefaultInstance.
type Orch struct {
	DB   *sqlite.DB
	Maps *fake.Registry
	HTTP *httpapi.Server
}

// DefaultInstance is the instance join tickets target.
const DefaultInstance = "dev-1"

// MustOpenOrch opens a fake orchestrator on loopback :0 ports, closed at the end of
// the test.
func MustOpenOrch(tb testing.TB) *Orch {
	tb.Helper()
	log := slog.New(slog.DiscardHandler)
	o := &Orch{DB: sqlite.NewDB(filepath.Join(tb.TempDir(), "fake.db"))}
	if err := o.DB.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { o.DB.Close() })
	root := testutil.Root(tb, Secret)
	o.Maps = fake.NewRegistry(root, DefaultInstance, log)
	adm := admission.NewService(root, o.DB, o.Maps, DefaultInstance, log)
	o.HTTP = httpapi.NewServer(o.Maps, adm, o.DB, root, log)
	o.HTTP.PublicAddr, o.HTTP.ControlAddr = "127.0.0.1:0", "127.0.0.1:0"
	if err := o.HTTP.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		o.HTTP.Close(ctx)
	})
	return o
}

// Join asks for a join ticket with body, as a player's browser does.
func (o *Orch) Join(tb testing.TB, body string) public.JoinResponse {
	tb.Helper()
	resp, err := http.Post(o.HTTP.PublicURL()+public.PathJoin, "application/json", strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var j public.JoinResponse
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&j) != nil {
		tb.Fatalf("join: %d", resp.StatusCode)
	}
	return j
}

// WaitFor polls cond until it holds, failing the test after 20 s.
func WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
