package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// sampleConfig is the Prometheus configuration the docs give hosts.
const sampleConfig = "docs/prometheus.yml"

// TestObservability_Prometheus runs the real orchestrator with real map containers and
// the edge, and checks what Prometheus gets: the documented configuration discovers
// exactly the running maps (promtool performs the discovery), and the metrics of every
// binary (orchestrator, edge, map server through the orchestrator's proxy) pass
// `promtool check metrics`.
func TestObservability_Prometheus(t *testing.T) {
	testutil.Promtool(t)
	cli := dockertest.Client(t)
	deployment := "test-" + randomHex(t, 4)
	second := deployment + "-b"
	t.Cleanup(func() { dockertest.RemoveDeployment(t, cli, deployment) })
	secret := randomHex(t, 16)
	dbPath := filepath.Join(t.TempDir(), "mapyard.db")
	child := startOrchestrator(t, childEnv(deployment, "127.0.0.1:0", dbPath, secret,
		"ORCH_DEFAULT_INSTANCE_ID="+deployment, "MAP_HEARTBEAT_MS=500"))
	waitStatus(t, child.public+"/readyz", http.StatusOK, 60*time.Second)

	// The credential Prometheus holds is the one the orchestrator wrote beside the
	// database, and it is not the root.
	buf, err := os.ReadFile(filepath.Join(filepath.Dir(dbPath), orchestrator.MetricsCredentialFileName))
	if err != nil {
		t.Fatal(err)
	}
	cred := strings.TrimSpace(string(buf))
	if want := testutil.Root(t, secret).MetricsCredential(); cred != want || cred == secret {
		t.Fatalf("metrics credential file holds %q, want the derived credential", cred)
	}

	testutil.PostJSON(t, child.control+httpapi.PathAdminMaps, secret, `{"instanceId":"`+second+`","mapId":"frontier"}`, http.StatusCreated, nil)
	waitInstance(t, child.control, secret, second, orchestrator.StateReady, 60*time.Second)
	e := openEdge(t, child.control, child.edgeCredential)
	testutil.PostJSON(t, e.PublicURL()+public.PathJoin, "", `{}`, http.StatusOK, nil)

	running := []string{deployment, second}
	t.Run("DiscoveryListsRunningMaps", func(t *testing.T) {
		if got := discovered(t, child.control, cred); !slices.Equal(got, running) {
			t.Fatalf("discovered %v, want %v", got, running)
		}
	})
	t.Run("PrometheusDiscoversThroughSampleConfig", func(t *testing.T) {
		dir := sampleConfigFor(t, child.control, e.MetricsURL(), cred)
		promtool(t, dir, "check", "config", "prometheus.yml")
		out := promtool(t, dir, "check", "service-discovery", "--timeout=8s", "prometheus.yml", "mapyard-maps")
		var targets []struct {
			Labels map[string]string `json:"labels"`
		}
		if err := json.Unmarshal([]byte(out), &targets); err != nil {
			t.Fatalf("promtool output: %v\n%s", err, out)
		}
		var got []string
		for _, tg := range targets {
			got = append(got, tg.Labels["instance"])
			if tg.Labels["__metrics_path__"] != httpapi.PathMapMetrics+"/"+tg.Labels["instance"] {
				t.Errorf("target %v: metrics path is not the proxy's", tg.Labels)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, running) {
			t.Fatalf("promtool discovered %v, want %v\n%s", got, running, out)
		}
	})
	t.Run("PromtoolCheckMetrics", func(t *testing.T) {
		sources := map[string]string{
			"orchestrator": child.control + "/metrics",
			"edge":         e.MetricsURL() + "/metrics",
		}
		// A series each source must serve: the orchestrator's new families all, since
		// this run joined, redeemed and committed.
		wants := map[string][]string{
			"orchestrator": {"mapyard_joins_total", "mapyard_join_duration_seconds",
				"mapyard_db_commit_duration_seconds", "mapyard_characters", "mapyard_snapshot_partitions_cached",
				"mapyard_map_instances"},
			"edge": {"mapyard_edge_ws_connections"},
		}
		for _, id := range running {
			sources["map server "+id] = child.control + httpapi.PathMapMetrics + "/" + id
			wants["map server "+id] = []string{"mapyard_map_ticks_total"}
		}
		for what, url := range sources {
			body := scrape(t, url, cred)
			testutil.CheckMetrics(t, what, body)
			for _, name := range wants[what] {
				if !strings.Contains(string(body), "\n"+name) {
					t.Errorf("%s metrics lack %s", what, name)
				}
			}
		}
	})
	t.Run("StoppedMapLeavesTheList", func(t *testing.T) {
		testutil.PostJSON(t, child.control+httpapi.PathAdminMaps+"/"+second+"/stop", secret, nil, http.StatusOK, nil)
		if got := discovered(t, child.control, cred); !slices.Equal(got, running[:1]) {
			t.Fatalf("discovered %v after stopping %s, want %v", got, second, running[:1])
		}
		status, body := getBearer(t, child.control+httpapi.PathMapMetrics+"/"+second, cred)
		if status != http.StatusServiceUnavailable {
			t.Fatalf("metrics of a stopped map: %d %s, want 503", status, body)
		}
	})
}

// discovered returns the instances the discovery list names, sorted.
func discovered(t *testing.T, controlURL, cred string) []string {
	t.Helper()
	status, body := getBearer(t, controlURL+httpapi.PathMapMetrics, cred)
	if status != http.StatusOK {
		t.Fatalf("discovery: %d %s", status, body)
	}
	var groups []struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	if err := json.Unmarshal(body, &groups); err != nil {
		t.Fatalf("discovery answer %s: %v", body, err)
	}
	var ids []string
	for _, g := range groups {
		ids = append(ids, g.Labels["instance"])
	}
	slices.Sort(ids)
	return ids
}

// scrape GETs url as Prometheus does, with the metrics credential, and returns the body.
func scrape(t *testing.T, url, cred string) []byte {
	t.Helper()
	status, body := getBearer(t, url, cred)
	if status != http.StatusOK {
		t.Fatalf("scrape %s: %d %s", url, status, body)
	}
	return body
}

// get sends GET url with the metrics credential as a bearer token.
func getBearer(t *testing.T, url, cred string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// sampleConfigFor copies the sample Prometheus configuration into a directory of its
// own with the credential beside it, pointed at this test's listeners instead of the
// kit's fixed ports.
func sampleConfigFor(t *testing.T, controlURL, edgeMetricsURL, cred string) string {
	t.Helper()
	cfg, err := os.ReadFile(filepath.Join(testutil.ModuleRoot(t), sampleConfig))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(cfg), "127.0.0.1:9000", strings.TrimPrefix(controlURL, "http://"))
	s = strings.ReplaceAll(s, "127.0.0.1:9101", strings.TrimPrefix(edgeMetricsURL, "http://"))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mapyard-metrics-credential"), []byte(cred+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// promtool runs promtool with args in dir and returns its standard output; a failure
// fails the test with everything it printed.
func promtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(testutil.Promtool(t), args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}
