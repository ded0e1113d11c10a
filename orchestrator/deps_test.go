package orchestrator_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestNoSQLiteOutsideOrchestrator checks that only the orchestrator can reach the
// database: no package outside orchestrator/ (the map server above all) may depend on
// modernc.org/sqlite or on the orchestrator's store. It fails when it finds no package
// outside orchestrator/, since the rule would then check nothing.
func TestNoSQLiteOutsideOrchestrator(t *testing.T) {
	root := testutil.ModuleRoot(t)
	var outside []string
	for _, pkg := range testutil.GoList(t, root, nil, "-f", "{{.ImportPath}}", "./...") {
		if rel, ok := strings.CutPrefix(pkg, "github.com/mapyard/mapyard/"); ok && rel != "orchestrator" && !strings.HasPrefix(rel, "orchestrator/") {
			outside = append(outside, pkg)
		}
	}
	if len(outside) == 0 {
		t.Fatal("go list found no package outside orchestrator/: the rule would check nothing")
	}
	for _, dep := range testutil.GoList(t, root, nil, append([]string{"-deps", "-f", "{{.ImportPath}}"}, outside...)...) {
		if strings.HasPrefix(dep, "modernc.org/sqlite") || strings.HasPrefix(dep, "github.com/mapyard/mapyard/orchestrator/sqlite") {
			t.Errorf("%s is reachable from packages outside orchestrator/: %v", dep, outside)
		}
	}
}

// TestDomainRootImportsNoContract checks that the orchestrator's domain (package
// orchestrator: its types and store interfaces) depends on no contract or transport
// package, not even through another package: the records it shares with the map
// contract live in the record leaf, so the wire can change without the domain and the
// domain is read without HTTP.
func TestDomainRootImportsNoContract(t *testing.T) {
	const m = "github.com/mapyard/mapyard/"
	contracts := []string{m + "mapserver/kernel/mapcontract", m + "mapserver/kernel/routetable", m + "mapserver/kernel/public", m + "mapserver/kernel/httpkit"}
	deps := testutil.GoList(t, testutil.ModuleRoot(t), nil, "-deps", "-f", "{{.ImportPath}}", "./orchestrator")
	if !slices.Contains(deps, m+"mapserver/kernel/record") {
		t.Errorf("package orchestrator no longer depends on mapserver/kernel/record (got %v): the rule checks nothing", deps)
	}
	for _, dep := range deps {
		if slices.Contains(contracts, dep) {
			t.Errorf("package orchestrator depends on the contract package %s", dep)
		}
	}
}
