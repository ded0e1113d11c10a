package httpapi_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// fakeTargets is a hand-written MapTargets: instance id -> control URL, every container
// with the credential "oc-" + its instance id.
type fakeTargets map[string]string

var _ httpapi.MapTargets = fakeTargets(nil)

func (f fakeTargets) ControlTarget(id string) (string, string, error) {
	url, ok := f[id]
	if !ok {
		return "", "", apierr.Errorf(apierr.ENOTFOUND, "no %q", id)
	}
	return url, "oc-" + id, nil
}

// fakeMapControl serves a map's /metrics behind the credential cred, with one counter.
func fakeMapControl(t *testing.T, cred string) *httptest.Server {
	t.Helper()
	reg := prometheus.NewRegistry()
	ticks := prometheus.NewCounter(prometheus.CounterOpts{Name: "mapyard_map_ticks_total", Help: "Simulation steps run."})
	ticks.Add(42)
	reg.MustRegister(ticks)
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(httpkit.SecretHeader) != cred || r.URL.Path != httpkit.PathMetrics {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// get sends GET url with header name=value and returns the status and body.
func get(t *testing.T, url, name, value string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if name != "" {
		req.Header.Set(name, value)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestMapMetrics(t *testing.T) {
	forest := fakeMapControl(t, "oc-forest-1")
	maps := &changingMaps{inst: []orchestrator.Instance{
		{ID: "default-1", MapID: "default", State: orchestrator.StateReady, ControlPort: 4001},
		{ID: "forest-1", MapID: "forest", State: orchestrator.StateReady, ControlPort: 4002},
		{ID: "cave-1", MapID: "cave", State: orchestrator.StateStopped},
	}}
	root := testutil.Root(t, secret)
	s := httpapi.NewServer(maps, nil, nil, root, slog.New(slog.DiscardHandler))
	s.PublicAddr, s.ControlAddr = "127.0.0.1:0", "127.0.0.1:0"
	s.ControlExtraIPs = []string{"127.0.0.2"}
	s.MapTargets = fakeTargets{"forest-1": forest.URL, "default-1": "http://127.0.0.1:1"}
	s.Metrics = promhttp.HandlerFor(prometheus.NewRegistry(), promhttp.HandlerOpts{})
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(t.Context()) })
	bearer := "Bearer " + root.MetricsCredential()

	t.Run("DiscoveryListsRunningMaps", func(t *testing.T) {
		status, body := get(t, s.ControlURL()+httpapi.PathMapMetrics, "Authorization", bearer)
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, body)
		}
		var groups []struct {
			Targets []string
			Labels  map[string]string
		}
		if err := json.Unmarshal([]byte(body), &groups); err != nil {
			t.Fatal(err)
		}
		host := strings.TrimPrefix(s.ControlURL(), "http://")
		want := map[string]string{"default-1": "default", "forest-1": "forest"}
		if len(groups) != len(want) {
			t.Fatalf("targets %s, want %v", body, want)
		}
		for _, g := range groups {
			id := g.Labels["instance"]
			if len(g.Targets) != 1 || g.Targets[0] != host || g.Labels["map"] != want[id] ||
				g.Labels["__metrics_path__"] != httpapi.PathMapMetrics+"/"+id {
				t.Errorf("target group %+v", g)
			}
		}
	})
	t.Run("ProxyAddsTheMapsCredential", func(t *testing.T) {
		status, body := get(t, s.ControlURL()+httpapi.PathMapMetrics+"/forest-1", "Authorization", bearer)
		if status != http.StatusOK || !strings.Contains(body, "mapyard_map_ticks_total 42") {
			t.Fatalf("status %d: %s", status, body)
		}
	})
	t.Run("RootSecretOpensMetrics", func(t *testing.T) {
		for _, path := range []string{httpkit.PathMetrics, httpapi.PathMapMetrics, httpapi.PathMapMetrics + "/forest-1"} {
			if status, body := get(t, s.ControlURL()+path, httpkit.SecretHeader, secret); status != http.StatusOK {
				t.Errorf("GET %s: %d %s", path, status, body)
			}
		}
	})
	for name, c := range map[string]struct {
		path, header, value string
		status              int
		code                string
	}{
		"ErrNoCredential":         {httpapi.PathMapMetrics, "", "", http.StatusUnauthorized, apierr.EUNAUTHORIZED},
		"ErrWrongBearer":          {httpapi.PathMapMetrics + "/forest-1", "Authorization", "Bearer " + secret, http.StatusUnauthorized, apierr.EUNAUTHORIZED},
		"ErrMapCredential":        {httpkit.PathMetrics, httpkit.SecretHeader, as(t, "forest-1"), http.StatusUnauthorized, apierr.EUNAUTHORIZED},
		"ErrMetricsCredNotAdmin":  {httpapi.PathAdminMaps, "Authorization", bearer, http.StatusUnauthorized, apierr.EUNAUTHORIZED},
		"ErrUnknownInstance":      {httpapi.PathMapMetrics + "/nowhere-1", "Authorization", bearer, http.StatusNotFound, apierr.ENOTFOUND},
		"ErrBadInstanceID":        {httpapi.PathMapMetrics + "/..%2Fadmin", "Authorization", bearer, http.StatusBadRequest, apierr.EBADREQUEST},
		"ErrMapDoesNotAnswer":     {httpapi.PathMapMetrics + "/default-1", "Authorization", bearer, http.StatusServiceUnavailable, apierr.EMAPUNAVAILABLE},
		"ErrMetricsCredIsNotRoot": {httpkit.PathMetrics, httpkit.SecretHeader, root.MetricsCredential(), http.StatusUnauthorized, apierr.EUNAUTHORIZED},
	} {
		t.Run(name, func(t *testing.T) {
			status, body := get(t, s.ControlURL()+c.path, c.header, c.value)
			var e httpkit.ErrorResponse
			if status != c.status || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != c.code {
				t.Fatalf("GET %s: %d %s, want %d %s", c.path, status, body, c.status, c.code)
			}
		})
	}
	t.Run("NotOnTheMapGateway", func(t *testing.T) {
		gw := "http://127.0.0.2:" + strconv.Itoa(s.ControlPort())
		for _, path := range []string{httpapi.PathMapMetrics, httpapi.PathMapMetrics + "/forest-1"} {
			if status, _ := get(t, gw+path, "Authorization", bearer); status != http.StatusNotFound && status != http.StatusUnauthorized {
				t.Errorf("GET %s on the gateway: %d, want 404 or 401", path, status)
			}
		}
	})
}

// BenchmarkMapMetricsProxy measures one scrape of a map's metrics through the
// orchestrator's proxy against the same scrape made directly (what the proxy's extra
// loopback hop costs).
func BenchmarkMapMetricsProxy(b *testing.B) {
	reg := prometheus.NewRegistry()
	for i := range 50 {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "mapyard_bench_" + strconv.Itoa(i) + "_total", Help: "A series."})
		c.Add(float64(i))
		reg.MustRegister(c)
	}
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	mapCtl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(httpkit.SecretHeader) != "oc-forest-1" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer mapCtl.Close()
	root := testutil.Root(b, secret)
	s := httpapi.NewServer(&changingMaps{}, nil, nil, root, slog.New(slog.DiscardHandler))
	s.PublicAddr, s.ControlAddr = "127.0.0.1:0", "127.0.0.1:0"
	s.MapTargets = fakeTargets{"forest-1": mapCtl.URL}
	if err := s.Open(); err != nil {
		b.Fatal(err)
	}
	defer s.Close(b.Context())
	scrape := func(b *testing.B, url, header, value string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set(header, value)
		for b.Loop() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	}
	b.Run("direct", func(b *testing.B) { scrape(b, mapCtl.URL+httpkit.PathMetrics, httpkit.SecretHeader, "oc-forest-1") })
	b.Run("proxy", func(b *testing.B) {
		scrape(b, s.ControlURL()+httpapi.PathMapMetrics+"/forest-1", "Authorization", "Bearer "+root.MetricsCredential())
	})
}
