package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/admission"
	"github.com/mapyard/mapyard/orchestrator/edge"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/keys"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
)

// publicCall is one call of a public route the edge forwards to the orchestrator.
type publicCall struct {
	name, method, path, body string
	bearer                   bool // sends Authorization: Bearer with a well-formed key
}

// publicCalls is every public route the edge forwards, each called the way a page does.
var publicCalls = []publicCall{
	{"Join", http.MethodPost, public.PathJoin, `{}`, false},
	{"ListCharacters", http.MethodGet, public.PathCharacters, "", true},
	{"CreateCharacter", http.MethodPost, public.PathCharacters, `{"name":"Ada"}`, true},
	{"SelectCharacter", http.MethodPost, public.PathCharacters + "/c1/select", "", true},
	{"DeleteCharacter", http.MethodDelete, public.PathCharacters + "/c1", "", true},
}

const testAuthKey = "Zq3v9LrT0pXw2YbN5cHs8KdA"

// answer is what a client sees of an HTTP answer.
type answer struct {
	status          int
	body, challenge string
}

// call sends one request to base and returns the answer.
func call(tb testing.TB, base, method, path, body, authorization string) answer {
	tb.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: string(b), challenge: resp.Header.Get("WWW-Authenticate")}
}

// codeOf returns the code of an error envelope, or "".
func codeOf(body string) string {
	var e httpkit.ErrorResponse
	_ = json.Unmarshal([]byte(body), &e)
	return e.Error.Code
}

// sameThroughEdge sends one call to the orchestrator's public listener and through
// the edge, and fails unless the player gets the same answer both ways, and one with
// wantCode.
func sameThroughEdge(t *testing.T, s *httpapi.Server, e *edge.Edge, method, path, body, authorization, wantCode string) {
	t.Helper()
	direct := call(t, s.PublicURL(), method, path, body, authorization)
	through := call(t, e.PublicURL(), method, path, body, authorization)
	if through != direct {
		t.Fatalf("through the edge %+v, from the orchestrator %+v", through, direct)
	}
	if got := codeOf(direct.body); direct.status != apierr.Status(wantCode) || got != wantCode {
		t.Fatalf("the orchestrator answered %d %q (%s), want %d %q", direct.status, got, direct.body, apierr.Status(wantCode), wantCode)
	}
}

// readyMaps is a hand-written fake supervisor with one ready instance, default-1. The
// methods these tests never reach are left to the nil embedded interface.
type readyMaps struct{ orchestrator.Maps }

var _ orchestrator.Maps = readyMaps{}

func (readyMaps) Instance(id string) (orchestrator.Instance, error) {
	if id != "default-1" {
		return orchestrator.Instance{}, apierr.Errorf(apierr.ENOTFOUND, "no %q", id)
	}
	return orchestrator.Instance{ID: id, MapID: "default", State: orchestrator.StateReady, GamePort: 1}, nil
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
func (readyMaps) Ready() bool { return true }
func (m readyMaps) Instances() []orchestrator.Instance {
	inst, _ := m.Instance("default-1")
	return []orchestrator.Instance{inst}
}

// refusing is a hand-written fake admission service that refuses every join and
// character call with err: the orchestrator's answer is all these tests look at. The
// map routes it never serves are left to the nil embedded interface.
type refusing struct {
	httpapi.Admission
	mu  sync.Mutex
	err error
}

var (
	_ httpapi.Admission  = (*refusing)(nil)
	_ httpapi.Characters = (*refusing)(nil)
)

func (f *refusing) set(err error) { f.mu.Lock(); f.err = err; f.mu.Unlock() }
func (f *refusing) refusal() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}
func (f *refusing) Join(context.Context, public.JoinRequest) (*public.JoinResponse, error) {
	return nil, f.refusal()
}
func (f *refusing) Characters(context.Context, string) ([]orchestrator.CharacterSummary, error) {
	return nil, f.refusal()
}
func (f *refusing) CreateCharacter(context.Context, string, string) (orchestrator.CharacterSummary, error) {
	return orchestrator.CharacterSummary{}, f.refusal()
}
func (f *refusing) SelectCharacter(context.Context, string, string) error { return f.refusal() }
func (f *refusing) DeleteCharacter(context.Context, string, string) error { return f.refusal() }

// openOrchestrator serves the orchestrator's HTTP API over adm and store on loopback
// ports, with the root of the tests' secret.
func openOrchestrator(tb testing.TB, root *keys.Root, adm httpapi.Admission, store httpapi.Persistence) *httpapi.Server {
	tb.Helper()
	s := httpapi.NewServer(readyMaps{}, adm, store, root, slog.New(slog.DiscardHandler))
	s.PublicAddr, s.ControlAddr = "127.0.0.1:0", "127.0.0.1:0"
	if err := s.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func mustRoot(tb testing.TB) *keys.Root {
	tb.Helper()
	root, err := keys.NewRoot(secret)
	if err != nil {
		tb.Fatal(err)
	}
	return root
}

// TestEdge_PassesOrchestratorErrors checks that every public route the edge forwards
// answers a player exactly as the orchestrator does (status, body and Bearer challenge)
// for every error code the orchestrator has, 401s for a player's ticket or key
// included, and for an error of its own (internal).
func TestEdge_PassesOrchestratorErrors(t *testing.T) {
	root := mustRoot(t)
	adm := &refusing{}
	s := openOrchestrator(t, root, adm, nil)
	e := MustOpenEdge(t, s.ControlURL(), func(c *edge.Config) { c.Credential = root.EdgeCredential() })

	refusals := map[string]error{"internal-cause": errors.New("disk on fire")}
	for _, code := range apierr.Codes() {
		if code != apierr.EEDGEUNAUTHORIZED { // the edge's own, tested below
			refusals[code] = apierr.Errorf(code, "refused with %s", code)
		}
	}
	refusals[apierr.ItemCodePrefix+"persistent"] = apierr.Errorf(apierr.ItemCodePrefix+"persistent", "an item rule")
	for name, err := range refusals {
		for _, c := range publicCalls {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				adm.set(err)
				auth := ""
				if c.bearer {
					auth = "Bearer " + testAuthKey
				}
				sameThroughEdge(t, s, e, c.method, c.path, c.body, auth, apierr.Code(err))
			})
		}
	}
}

// TestEdge_RefusedRejoinPassesThrough plays the refusals a page meets with the real
// admission service behind the orchestrator: a garbage, tampered, already used or
// expired rejoin credential, a finished guest session, and the join and character
// API's own refusals each reach the player through the edge as the orchestrator
// answered them, never as unavailable.
func TestEdge_RefusedRejoinPassesThrough(t *testing.T) {
	root := mustRoot(t)
	db := sqlite.NewDB(filepath.Join(t.TempDir(), "mapyard.db"))
	if err := db.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	adm := admission.NewService(root, db, readyMaps{}, "default-1", slog.New(slog.DiscardHandler))
	var skew atomic.Int64
	adm.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	s := openOrchestrator(t, root, adm, db)
	e := MustOpenEdge(t, s.ControlURL(), func(c *edge.Config) { c.Credential = root.EdgeCredential() })

	join := func(body any) public.JoinResponse {
		t.Helper()
		raw, _ := json.Marshal(body)
		a := call(t, s.PublicURL(), http.MethodPost, public.PathJoin, string(raw), "")
		var j public.JoinResponse
		if a.status != http.StatusOK || json.Unmarshal([]byte(a.body), &j) != nil || j.Rejoin == "" {
			t.Fatalf("join %s: %d %s", raw, a.status, a.body)
		}
		return j
	}
	keyed := join(public.JoinRequest{AuthKey: testAuthKey})
	used := join(public.JoinRequest{Rejoin: keyed.Rejoin}) // uses keyed.Rejoin up
	guest := join(struct{}{}).Rejoin                       // never entered a map: its session is over
	tampered := tamper(used.Rejoin)
	rejoin := func(cred string) string {
		b, _ := json.Marshal(public.JoinRequest{Rejoin: cred})
		return string(b)
	}

	for _, tc := range []struct {
		name, method, path, body, auth, code string
		skew                                 time.Duration
	}{
		{"ErrTicketInvalidGarbage", http.MethodPost, public.PathJoin, rejoin("garbage"), "", apierr.ETICKETINVALID, 0},
		{"ErrTicketInvalidTampered", http.MethodPost, public.PathJoin, rejoin(tampered), "", apierr.ETICKETINVALID, 0},
		{"ErrTicketInvalidGuestSessionOver", http.MethodPost, public.PathJoin, rejoin(guest), "", apierr.ETICKETINVALID, 0},
		{"ErrTicketInvalidNotARejoinCredential", http.MethodPost, public.PathJoin, rejoin(used.Ticket), "", apierr.ETICKETINVALID, 0},
		{"ErrTicketUsed", http.MethodPost, public.PathJoin, rejoin(keyed.Rejoin), "", apierr.ETICKETUSED, 0},
		{"ErrTicketExpired", http.MethodPost, public.PathJoin, rejoin(used.Rejoin), "", apierr.ETICKETEXPIRED, admission.DefaultRejoinTTL + time.Hour},
		{"ErrBadRequestRejoinWithKey", http.MethodPost, public.PathJoin, `{"rejoin":"x","authKey":"` + testAuthKey + `"}`, "", apierr.EBADREQUEST, 0},
		{"ErrBadRequestKey", http.MethodPost, public.PathJoin, `{"authKey":"short"}`, "", apierr.EBADREQUEST, 0},
		{"ErrForbiddenCharacter", http.MethodPost, public.PathJoin, `{"authKey":"` + testAuthKey + `","characterId":"someone-else"}`, "", apierr.EFORBIDDEN, 0},
		{"ErrUnauthorizedNoKey", http.MethodGet, public.PathCharacters, "", "", apierr.EUNAUTHORIZED, 0},
		{"ErrNotFoundCharacter", http.MethodPost, public.PathCharacters + "/someone-else/select", "", "Bearer " + testAuthKey, apierr.ENOTFOUND, 0},
		{"ErrBadRequestName", http.MethodPost, public.PathCharacters, `{"name":"<b>"}`, "Bearer " + testAuthKey, apierr.EBADREQUEST, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			skew.Store(int64(tc.skew))
			defer skew.Store(0)
			sameThroughEdge(t, s, e, tc.method, tc.path, tc.body, tc.auth, tc.code)
		})
	}
}

// tamper changes the last character of a credential (its signature).
func tamper(cred string) string {
	last := "A"
	if strings.HasSuffix(cred, last) {
		last = "B"
	}
	return cred[:len(cred)-1] + last
}

// logBuffer collects an edge's log as JSON lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// errors returns the messages of the records logged at level ERROR.
func (b *logBuffer) errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, line := range strings.Split(b.buf.String(), "\n") {
		var r struct{ Level, Msg string }
		if json.Unmarshal([]byte(line), &r) == nil && r.Level == slog.LevelError.String() {
			out = append(out, r.Msg)
		}
	}
	return out
}

// TestEdge_CredentialRefused checks the one refusal that is the edge's own: when the
// orchestrator refuses the edge's credential (edge_unauthorized), a player's call is
// answered unavailable, and the edge logs it as the error it is, on a forwarded call
// as on the route watch.
func TestEdge_CredentialRefused(t *testing.T) {
	root := mustRoot(t)
	s := openOrchestrator(t, root, &refusing{err: apierr.Errorf(apierr.ETICKETINVALID, "not reached")}, nil)
	for _, tc := range []struct {
		name  string
		watch bool
	}{
		{"Forwarded", false}, // a fixed route table: no watch, the join meets the refusal itself
		{"Watch", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &logBuffer{}
			cfg := edge.Config{PublicAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", OrchURL: s.ControlURL(),
				Credential: "ec1.not-this-orchestrators", MaxConns: 10, Procs: 1, IdleTimeoutMS: 60000,
				WriteTimeoutMS: 5000, DrainTimeoutMS: 1000, LogLevel: "info"}
			if !tc.watch {
				cfg.StaticRoutes = "default-1=1"
			}
			e, err := edge.New(cfg, slog.New(slog.NewJSONHandler(logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Open(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.Close(context.Background()) })
			waitFor(t, "the refusal logged as an error", func() bool {
				if !tc.watch {
					a := call(t, e.PublicURL(), http.MethodPost, public.PathJoin, `{}`, "")
					if a.status != http.StatusServiceUnavailable || codeOf(a.body) != apierr.EUNAVAILABLE {
						t.Fatalf("join with the edge's credential refused: %+v, want 503 unavailable", a)
					}
				}
				for _, msg := range logs.errors() {
					if strings.Contains(msg, "refused the edge's credential") {
						return true
					}
				}
				return false
			})
			if tc.watch {
				a := call(t, e.PublicURL(), http.MethodPost, public.PathJoin, `{}`, "")
				if a.status != http.StatusServiceUnavailable || codeOf(a.body) != apierr.EUNAVAILABLE {
					t.Fatalf("join while the watch is refused: %+v, want 503 unavailable", a)
				}
			}
		})
	}
}
