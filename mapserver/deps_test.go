package mapserver_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestMapServerDependsOnContractsOnly checks that the map server's code (tests may
// start a fake orchestrator) reaches the orchestrator only through the map contract
// (with the records it carries), the shared HTTP plumbing, the error codes, and the
// public routes its Go client joins through (edgeapi): a map
// server built from this tree must not carry the orchestrator's supervisor, store or
// admission code, so the two can change and ship apart.
func TestMapServerDependsOnContractsOnly(t *testing.T) {
	allowed := []string{
		"github.com/mapyard/mapyard/orchestrator/apierr",
		"github.com/mapyard/mapyard/orchestrator/edgeapi", // the public join route, for the Go client
		"github.com/mapyard/mapyard/orchestrator/httpkit",
		"github.com/mapyard/mapyard/orchestrator/mapcontract",
		"github.com/mapyard/mapyard/orchestrator/record",
	}
	root := testutil.ModuleRoot(t)
	deps := testutil.GoList(t, root, nil, "-deps", "-f", "{{.ImportPath}}", "./mapserver/...")
	var reached []string
	for _, dep := range deps {
		if dep == "github.com/mapyard/mapyard/orchestrator" || strings.HasPrefix(dep, "github.com/mapyard/mapyard/orchestrator/") {
			if !slices.Contains(allowed, dep) {
				t.Errorf("mapserver/... depends on %s; only %v may be imported", dep, allowed)
			}
			if !slices.Contains(reached, dep) {
				reached = append(reached, dep)
			}
		}
	}
	if !slices.Contains(reached, "github.com/mapyard/mapyard/orchestrator/mapcontract") {
		t.Errorf("mapserver/... no longer depends on orchestrator/mapcontract (got %v): the rule checks nothing", reached)
	}
}
