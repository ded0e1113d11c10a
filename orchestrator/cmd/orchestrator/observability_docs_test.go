package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// sampleDashboard is the Grafana dashboard the docs give hosts.
const sampleDashboard = "docs/grafana-dashboard.json"

// TestPrometheusSampleConfig checks docs/prometheus.yml with `promtool check config`,
// as a host installs it: the credential file beside it.
func TestPrometheusSampleConfig(t *testing.T) {
	testutil.Promtool(t)
	dir := sampleConfigFor(t, "http://127.0.0.1:9000", "http://127.0.0.1:9101", "mt1.placeholder")
	promtool(t, dir, "check", "config", "prometheus.yml")
}

// dashboard is what the test reads of a Grafana dashboard: its panels (rows nest none
// while expanded) and their queries.
type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestGrafanaDashboard checks docs/grafana-dashboard.json: it is a dashboard, every
// query is PromQL that promtool parses (Grafana's variables replaced by values), and
// every mapyard series it reads is one the code exports, so a renamed metric cannot
// leave the dashboard silently empty.
func TestGrafanaDashboard(t *testing.T) {
	root := testutil.ModuleRoot(t)
	buf, err := os.ReadFile(filepath.Join(root, sampleDashboard))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(buf, &d); err != nil {
		t.Fatalf("%s: %v", sampleDashboard, err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: title %q, uid %q, %d panels", sampleDashboard, d.Title, d.UID, len(d.Panels))
	}

	exported := exportedMetrics(t, root)
	vars := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*")
	name := regexp.MustCompile(`\bmapyard_[a-z0-9_]+`)
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	for _, p := range d.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			rules = append(rules, rule{Record: fmt.Sprintf("dashboard:query_%d", len(rules)+1), Expr: vars.Replace(q.Expr)})
			for _, n := range name.FindAllString(q.Expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
				if !exported[n] && !exported[base] {
					t.Errorf("panel %q reads %s, which no binary exports", p.Title, n)
				}
			}
		}
	}

	// Every query as a recording rule: promtool parses rules files as PromQL.
	testutil.Promtool(t)
	file, err := json.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), file, 0o600); err != nil {
		t.Fatal(err)
	}
	promtool(t, dir, "check", "rules", "rules.yml")
}

// exportedMetrics returns the mapyard metric names the non-test Go code declares.
func exportedMetrics(t *testing.T, root string) map[string]bool {
	t.Helper()
	lit := regexp.MustCompile(`"(mapyard_[a-z0-9_]+)"`)
	names := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range lit.FindAllStringSubmatch(string(src), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 20 {
		t.Fatalf("found only %d metric names in the code", len(names))
	}
	return names
}
