package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// adminMaps is a hand-written fake supervisor for the admin API: default-1 is ready,
// and creates are recorded. The methods the admin calls of these tests do not reach
// are left to the nil embedded interface.
type adminMaps struct {
	orchestrator.Maps
	mu      sync.Mutex
	created []orchestrator.CreateInstance
}

func (m *adminMaps) Instances() []orchestrator.Instance {
	inst, _ := m.Instance("default-1")
	return []orchestrator.Instance{inst}
}

func (m *adminMaps) Instance(id string) (orchestrator.Instance, error) {
	if id != "default-1" {
		return orchestrator.Instance{}, apierr.Errorf(apierr.ENOTFOUND, "no instance %q", id)
	}
	return orchestrator.Instance{ID: id, MapID: "default", State: orchestrator.StateReady}, nil
}

func (m *adminMaps) Create(_ context.Context, r orchestrator.CreateInstance) (orchestrator.Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.created = append(m.created, r)
	return orchestrator.Instance{ID: r.InstanceID, MapID: r.MapID, State: orchestrator.StateStarting}, nil
}

func (m *adminMaps) Settle(_ context.Context, id string) (orchestrator.Instance, error) {
	return orchestrator.Instance{ID: id, State: orchestrator.StateReady}, nil
}

// adminKit is a real control listener (httpapi) whose root secret the orchestrator's
// first start generated in dataDir, as in the orchestrator's container.
type adminKit struct {
	maps    *adminMaps
	secret  string
	dataDir string
	control string // host:port
}

func newAdminKit(t *testing.T) *adminKit {
	t.Helper()
	dir := t.TempDir()
	secret, err := orchestrator.LoadOrCreateSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	maps := &adminMaps{}
	s := httpapi.NewServer(maps, nil, nil, testutil.Root(t, secret), slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.PublicAddr, s.ControlAddr = "127.0.0.1:0", "127.0.0.1:0"
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return &adminKit{maps: maps, secret: secret, dataDir: dir, control: strings.TrimPrefix(s.ControlURL(), "http://")}
}

// env is the orchestrator's environment as `docker exec` hands it to the admin:
// its control address and its database path, beside which the secret is kept.
func (k *adminKit) env(extra ...string) []string {
	return append([]string{"ORCH_CONTROL_ADDR=" + k.control, "ORCH_DB_PATH=" + filepath.Join(k.dataDir, "mapyard.db")}, extra...)
}

// adminRun is one `orchestrator admin` run: its exit code, stdout and stderr.
type adminRun struct {
	code           int
	stdout, stderr string
}

func runAdminT(t *testing.T, env []string, stdin string, args ...string) adminRun {
	t.Helper()
	var out, errw bytes.Buffer
	code := runAdmin(args, env, strings.NewReader(stdin), &out, &errw)
	return adminRun{code: code, stdout: out.String(), stderr: errw.String()}
}

// wantNoSecret fails when the root secret shows in what the admin printed.
func (r adminRun) wantNoSecret(t *testing.T, secret string) {
	t.Helper()
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Fatalf("the root secret was printed:\nstdout %s\nstderr %s", r.stdout, r.stderr)
	}
}

// wantError checks an error answer: exit 1, nothing on stdout, and on stderr the
// error as the orchestrator structured it, with code.
func (r adminRun) wantError(t *testing.T, code string) apierr.Error {
	t.Helper()
	if r.code != 1 || r.stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 1 and nothing on stdout", r.code, r.stdout, r.stderr)
	}
	var e httpkit.ErrorResponse
	dec := json.NewDecoder(strings.NewReader(r.stderr))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("stderr %q is not an error answer: %v", r.stderr, err)
	}
	if e.Error.Code != code {
		t.Fatalf("error %+v, want code %s", e.Error, code)
	}
	return e.Error
}

// TestAdmin calls the real control listener as an operator does through `docker exec`:
// the answer on stdout, the root secret found beside the database and never printed,
// an error answer's JSON on stderr with exit status 1.
func TestAdmin(t *testing.T) {
	k := newAdminKit(t)

	t.Run("GetMaps", func(t *testing.T) {
		for _, args := range [][]string{{"/admin/maps"}, {"GET", "/admin/maps"}, {"get", "/admin/maps"}} {
			r := runAdminT(t, k.env(), "", args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("%q: exit %d, stderr %q", args, r.code, r.stderr)
			}
			var got struct{ Instances []orchestrator.Instance }
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got.Instances) != 1 || got.Instances[0].ID != "default-1" {
				t.Fatalf("%q: stdout %q (%v), want the instance list", args, r.stdout, err)
			}
			if !strings.HasSuffix(r.stdout, "\n") {
				t.Fatalf("%q: stdout %q does not end its line", args, r.stdout)
			}
			r.wantNoSecret(t, k.secret)
		}
	})
	t.Run("CreateFromArgumentAndStdin", func(t *testing.T) {
		body := `{"instanceId":"forest-1","mapId":"forest","config":{"seed":7}}`
		for _, r := range []adminRun{
			runAdminT(t, k.env(), "", "POST", "/admin/maps", body),
			runAdminT(t, k.env(), "", "/admin/maps", strings.Replace(body, "forest-1", "forest-2", 1)), // a BODY means POST
			runAdminT(t, k.env(), strings.Replace(body, "forest-1", "forest-3", 1), "POST", "/admin/maps", "-"),
		} {
			var inst orchestrator.Instance
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &inst) != nil || inst.State != orchestrator.StateReady {
				t.Fatalf("exit %d, stdout %q, stderr %q; want the created instance", r.code, r.stdout, r.stderr)
			}
		}
		k.maps.mu.Lock()
		defer k.maps.mu.Unlock()
		var ids []string
		for _, c := range k.maps.created {
			ids = append(ids, c.InstanceID)
		}
		if got, want := strings.Join(ids, ","), "forest-1,forest-2,forest-3"; got != want {
			t.Fatalf("created %s, want %s", got, want)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		r := runAdminT(t, k.env(), "", "/admin/maps/no-such-map")
		if e := r.wantError(t, apierr.ENOTFOUND); !strings.Contains(e.Message, "no-such-map") {
			t.Fatalf("message %q does not name the map", e.Message)
		}
		r.wantNoSecret(t, k.secret)
	})
	t.Run("ErrBadRequest", func(t *testing.T) {
		runAdminT(t, k.env(), "", "POST", "/admin/maps", `{"instanceId":`).wantError(t, apierr.EBADREQUEST)
	})
	t.Run("SecretFromEnvironment", func(t *testing.T) {
		// ORCH_INTERNAL_RPC_SECRET wins over the file, as in the orchestrator: the right
		// one in an empty data dir is let in, a wrong one beside the right file is not.
		empty := []string{"ORCH_CONTROL_ADDR=" + k.control, "ORCH_DB_PATH=" + filepath.Join(t.TempDir(), "mapyard.db")}
		if r := runAdminT(t, append(empty, "ORCH_INTERNAL_RPC_SECRET="+k.secret), "", "/admin/maps"); r.code != 0 {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		wrong := "wrong-root-secret-0123456789"
		r := runAdminT(t, k.env("ORCH_INTERNAL_RPC_SECRET="+wrong), "", "/admin/maps")
		r.wantError(t, apierr.EUNAUTHORIZED)
		r.wantNoSecret(t, wrong)
	})
}

// TestAdmin_NoRequest checks what the admin refuses before any request: bad arguments,
// a configuration the orchestrator would refuse, and no root secret. Nothing reaches
// the control listener, and the missing secret is not created.
func TestAdmin_NoRequest(t *testing.T) {
	var reached atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Write([]byte("{}\n"))
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, orchestrator.SecretFileName), []byte("the-root-secret-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"ORCH_CONTROL_ADDR=" + strings.TrimPrefix(srv.URL, "http://"), "ORCH_DB_PATH=" + filepath.Join(dir, "mapyard.db")}
	for _, tt := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"ErrNoPath", env, nil, "no PATH"},
		{"ErrRelativePath", env, []string{"admin/maps"}, "neither a method"},
		{"ErrURL", env, []string{"GET", "http://127.0.0.1:1/admin/maps"}, "must be a path"},
		{"ErrSchemeRelativeURL", env, []string{"//evil.example/admin/maps"}, "must be a path"},
		{"ErrMethod", env, []string{"PATCH", "/admin/maps"}, "neither a method"},
		{"ErrGetWithBody", env, []string{"GET", "/admin/maps", "{}"}, "GET takes no BODY"},
		{"ErrTooManyArguments", env, []string{"POST", "/admin/maps", "{", "}"}, "quote it"},
		{"ErrConfig", append(env, "ORCH_CONTROL_ADDR=0.0.0.0:9000"), []string{"/admin/maps"}, "ORCH_CONTROL_ADDR"},
		{"ErrNoSecret", []string{env[0], "ORCH_DB_PATH=" + filepath.Join(t.TempDir(), "mapyard.db")}, []string{"/admin/maps"}, "no root secret"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := runAdminT(t, tt.env, "", tt.args...)
			if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2 and %q", r.code, r.stdout, r.stderr, tt.want)
			}
			r.wantNoSecret(t, "the-root-secret-0123456789")
		})
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("%d requests reached the control listener", n)
	}
	t.Run("NoSecretCreated", func(t *testing.T) {
		empty := t.TempDir()
		runAdminT(t, []string{env[0], "ORCH_DB_PATH=" + filepath.Join(empty, "mapyard.db")}, "", "/admin/maps")
		if entries, _ := os.ReadDir(empty); len(entries) != 0 {
			t.Fatalf("the admin wrote %d files to the data dir", len(entries))
		}
	})
}

// TestAdmin_Refused: with nothing listening at ORCH_CONTROL_ADDR (the admin run
// outside the orchestrator's container), the admin says so and exits 2.
func TestAdmin_Refused(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	r := runAdminT(t, []string{"ORCH_CONTROL_ADDR=" + addr, "ORCH_INTERNAL_RPC_SECRET=the-root-secret-0123456789"}, "", "/admin/maps")
	if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "no answer from the control listener at "+addr) {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r.wantNoSecret(t, "the-root-secret-0123456789")
}

// TestAdmin_SecretStaysLocal: an answer that redirects is not followed (the secret
// goes to the local control listener only), and an answer without mapyard's error
// body still ends as a structured error.
func TestAdmin_SecretStaysLocal(t *testing.T) {
	var leaked atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(httpkit.SecretHeader) != "" {
			leaked.Add(1)
		}
	}))
	t.Cleanup(elsewhere.Close)
	control := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, elsewhere.URL+"/admin/maps", http.StatusTemporaryRedirect)
			return
		}
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	t.Cleanup(control.Close)
	env := []string{"ORCH_CONTROL_ADDR=" + strings.TrimPrefix(control.URL, "http://"), "ORCH_INTERNAL_RPC_SECRET=the-root-secret-0123456789"}

	runAdminT(t, env, "", "/redirect").wantError(t, apierr.EUNAVAILABLE)
	if n := leaked.Load(); n != 0 {
		t.Fatalf("the secret was sent to another server %d times", n)
	}
	e := runAdminT(t, env, "", "/admin/maps").wantError(t, apierr.EUNAVAILABLE)
	if !strings.Contains(e.Message, "502") {
		t.Fatalf("message %q does not give the status", e.Message)
	}
}

// TestRun_Admin: the binary's admin subcommand is runAdmin.
func TestRun_Admin(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"admin", "-h"}, nil, &out, io.Discard); code != 0 || !strings.Contains(out.String(), "Usage: orchestrator admin") {
		t.Fatalf("exit %d, stdout %q", code, out.String())
	}
}
