package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/admission"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// syncBuffer is a log sink tests can read while the server writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// withMaxCharacters sets the admission service's cap.
func withMaxCharacters(n int) func(*httpapi.Server) {
	return func(s *httpapi.Server) { s.Admission.(*admission.Service).MaxCharactersPerKey = n }
}

// redeemAs enters the player of a join answer into its map as that map would (redeem
// with the map's credential) and returns the character the orchestrator admitted.
func redeemAs(s *httpapi.Server) func(*testing.T, public.JoinResponse) string {
	return func(t *testing.T, j public.JoinResponse) string {
		var r mapcontract.RedeemResult
		testutil.PostJSON(t, s.ControlURL()+mapcontract.PathRedeem, as(t, j.InstanceID),
			mapcontract.RedeemRequest{InstanceID: j.InstanceID, Token: j.Ticket}, http.StatusOK, &r)
		return r.CharacterID
	}
}

// TestCharacters runs the character API's flows against the real orchestrator server
// over its real SQLite file, on the public listener and on the control listener the
// edge forwards to, and then checks that no authKey it used reached the log, the
// database file or its write-ahead log.
func TestCharacters(t *testing.T) {
	logs := &syncBuffer{}
	s, db := MustOpenServerLog(t, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), withMaxCharacters(4))
	var used []string
	t.Run("Public", func(t *testing.T) {
		used = append(used, testutil.CharacterFlows(t, testutil.CharacterAPI{Base: s.PublicURL()}, 4, redeemAs(s))...)
	})
	t.Run("Control", func(t *testing.T) {
		used = append(used, testutil.CharacterFlows(t, testutil.CharacterAPI{Base: s.ControlURL(), Secret: secret}, 4, redeemAs(s))...)
		var e struct{ Error apierr.Error }
		testutil.GetJSON(t, s.ControlURL()+public.PathCharacters, "", http.StatusUnauthorized, &e)
		if e.Error.Code != apierr.EEDGEUNAUTHORIZED {
			// The edge tells the refusal of its own credential from a player's by it.
			t.Fatalf("a call without the edge's credential: %+v, want %s", e.Error, apierr.EEDGEUNAUTHORIZED)
		}
	})
	t.Run("WWWAuthenticate", func(t *testing.T) {
		resp, err := http.Get(s.PublicURL() + public.PathCharacters)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
			t.Fatalf("401 without a Bearer challenge: %q", got)
		}
	})
	t.Run("RawKeyNeverStored", func(t *testing.T) {
		if len(used) != 4 {
			t.Fatalf("flows used %d keys", len(used))
		}
		if !strings.Contains(logs.String(), "character created") {
			t.Fatal("the log captured nothing: the check would prove nothing")
		}
		files := map[string]string{"log": logs.String()}
		for _, f := range []string{db.Path, db.Path + "-wal"} {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			files[f] = string(b)
		}
		for _, key := range used {
			for where, content := range files {
				if strings.Contains(content, key) {
					t.Errorf("a raw authKey appears in %s", where)
				}
			}
		}
	})
}

// TestAdminSessions checks the operator's view: a saved character in a map and a guest,
// each with its state, and the cleanup's counts; both need the root secret.
func TestAdminSessions(t *testing.T) {
	s, db := MustOpenServer(t)
	api := testutil.CharacterAPI{Base: s.PublicURL()}
	key := testutil.NewAuthKey(t)
	saved := api.Join(t, public.JoinRequest{AuthKey: key})
	var r mapcontract.RedeemResult
	testutil.PostJSON(t, s.ControlURL()+mapcontract.PathRedeem, as(t, "default-1"),
		mapcontract.RedeemRequest{InstanceID: "default-1", Token: saved.Ticket}, http.StatusOK, &r)
	guest := api.Join(t, public.JoinRequest{})
	redeemAs(s)(t, guest)

	var got struct{ Sessions []orchestrator.Session }
	testutil.GetJSON(t, s.ControlURL()+httpapi.PathAdminSessions, secret, http.StatusOK, &got)
	if len(got.Sessions) != 2 {
		t.Fatalf("sessions %+v, want 2", got.Sessions)
	}
	byID := map[string]orchestrator.Session{}
	for _, ss := range got.Sessions {
		byID[ss.CharacterID] = ss
	}
	if ss := byID[saved.CharacterID]; ss.InstanceID != "default-1" || ss.State != orchestrator.SessionActive || ss.Disposable ||
		len(ss.Identity) != orchestrator.IdentityPrefixLen || ss.Name != orchestrator.DefaultCharacterName || ss.SinceMs == 0 {
		t.Fatalf("saved session %+v", ss)
	}
	if ss := byID[guest.CharacterID]; !ss.Disposable || ss.State != orchestrator.SessionGuest || ss.Identity != "guest" {
		t.Fatalf("guest session %+v", ss)
	}
	var res orchestrator.CleanupResult
	testutil.PostJSON(t, s.ControlURL()+httpapi.PathAdminCleanup, secret, nil, http.StatusOK, &res)
	if res.Nonces != 0 || res.Transfers != 0 || res.GuestLeases != 0 {
		t.Fatalf("cleanup removed %+v right after the joins", res)
	}
	t.Run("Saves", func(t *testing.T) {
		payload := json.RawMessage(`{"mapId":"default","instanceId":"default-1","x":1,"y":2}`)
		testutil.PostJSON(t, s.ControlURL()+mapcontract.PathPersistSnapshot, as(t, "default-1"), mapcontract.PersistSnapshot{
			InstanceID: "default-1", Partition: record.CharacterPartition(r.CharacterID), Revision: 1, Epoch: r.Epoch,
			Envelope: record.NewSnapshotEnvelope("sim-7", 10, 0, payload)}, http.StatusOK, nil)
		if _, err := db.Checkpoint(context.Background()); err != nil {
			t.Fatal(err)
		}
		var got struct{ Saves []orchestrator.CharacterSave }
		testutil.GetJSON(t, s.ControlURL()+httpapi.PathAdminCharacters+"/"+r.CharacterID+"/saves", secret, http.StatusOK, &got)
		if len(got.Saves) != 1 || got.Saves[0].Source != "checkpoint" || got.Saves[0].SimCoreVersion != "sim-7" ||
			got.Saves[0].SchemaVersion != record.SnapshotSchemaVersion || len(got.Saves[0].StateHash) != 64 {
			t.Fatalf("saves %+v", got.Saves)
		}
		testutil.GetJSON(t, s.ControlURL()+httpapi.PathAdminCharacters+"/"+r.CharacterID+"/saves", "", http.StatusUnauthorized, nil)
	})
	testutil.GetJSON(t, s.ControlURL()+httpapi.PathAdminSessions, "", http.StatusUnauthorized, nil)
	testutil.PostJSON(t, s.ControlURL()+httpapi.PathAdminCleanup, as(t, "default-1"), nil, http.StatusUnauthorized, nil)
	testutil.GetJSON(t, s.PublicURL()+httpapi.PathAdminSessions, secret, http.StatusNotFound, nil)
}
