package orchestrator_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoSQLiteOutsideOrchestrator checks that only the orchestrator can reach the
// database: no package outside orchestrator/ (the map server above all) may depend on
// modernc.org/sqlite or on the orchestrator's store.
func TestNoSQLiteOutsideOrchestrator(t *testing.T) {
	root := moduleRoot(t)
	out := goList(t, root, "-f", "{{.ImportPath}}", "./...")
	var outside []string
	for _, pkg := range strings.Fields(out) {
		if rel, ok := strings.CutPrefix(pkg, "github.com/mapyard/mapyard/"); ok && rel != "orchestrator" && !strings.HasPrefix(rel, "orchestrator/") {
			outside = append(outside, pkg)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "mapserver")); err != nil {
		t.Logf("no mapserver/ yet: checking the %d other packages outside orchestrator/", len(outside))
	}
	if len(outside) == 0 {
		t.Skip("no packages outside orchestrator/ yet")
	}
	deps := goList(t, root, append([]string{"-deps", "-f", "{{.ImportPath}}"}, outside...)...)
	for _, dep := range strings.Fields(deps) {
		if strings.HasPrefix(dep, "modernc.org/sqlite") || strings.HasPrefix(dep, "github.com/mapyard/mapyard/orchestrator/sqlite") {
			t.Errorf("%s is reachable from packages outside orchestrator/: %v", dep, outside)
		}
	}
}

// moduleRoot returns the directory holding go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	gomod := strings.TrimSpace(goList(t, ".", "-m", "-f", "{{.GoMod}}"))
	if gomod == "" {
		t.Fatal("not in a module")
	}
	return filepath.Dir(gomod)
}

// goList runs `go list args...` in dir and returns its output.
func goList(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list %v: %v\n%s", args, err, stderr)
	}
	return string(out)
}
