package kernel_test

import (
	"strings"
	"testing"

	"github.com/mapyard/mapyard/orchestrator/testutil"
)

const module = "github.com/mapyard/mapyard/"

// tree says which of the three parts of the house a package of this module is in:
// "kernel" (mapserver/kernel/...: the code both sides share), "mapserver" or
// "orchestrator".
func tree(pkg string) string {
	rel, _ := strings.CutPrefix(pkg, module)
	switch {
	case rel == "mapserver/kernel" || strings.HasPrefix(rel, "mapserver/kernel/"):
		return "kernel"
	case rel == "mapserver" || strings.HasPrefix(rel, "mapserver/"):
		return "mapserver"
	default:
		return "orchestrator"
	}
}

// imports lists, for every package go list finds under patterns, its non-test imports:
// one "pkg:imp,imp,..." field per package (testutil.GoList splits its output at white
// space, so the format has none).
func imports(t *testing.T, patterns ...string) map[string][]string {
	t.Helper()
	root := testutil.ModuleRoot(t)
	out := map[string][]string{}
	for _, f := range testutil.GoList(t, root, nil, append([]string{"-f", `{{.ImportPath}}:{{join .Imports ","}}`}, patterns...)...) {
		pkg, imps, _ := strings.Cut(f, ":")
		out[pkg] = nil
		if imps != "" {
			out[pkg] = strings.Split(imps, ",")
		}
	}
	return out
}

// TestHouseRules checks the one rule between the trees, on every non-test import of
// every package: the kernel imports neither tree; the map server and the orchestrator
// import each other only through the kernel. So each tree reads alone, with the kernel
// beside it, and a change inside one never reaches the other but through a contract.
func TestHouseRules(t *testing.T) {
	seen := map[string]int{}
	for from, imps := range imports(t, "./...") {
		seen[tree(from)]++
		for _, imp := range imps {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			switch src, dst := tree(from), tree(imp); {
			case src == "kernel" && dst != "kernel":
				t.Errorf("kernel package %s imports %s: the kernel imports no tree", from, imp)
			case src == "mapserver" && dst == "orchestrator", src == "orchestrator" && dst == "mapserver":
				t.Errorf("%s imports %s: the trees meet only in mapserver/kernel", from, imp)
			}
		}
	}
	for _, part := range []string{"kernel", "mapserver", "orchestrator"} {
		if seen[part] == 0 {
			t.Errorf("go list found no package in %s: the rule would check nothing", part)
		}
	}
}

// edgeTree reports whether a package is the edge's: orchestrator/edge and what is below
// it, and its binary orchestrator/cmd/edge.
func edgeTree(pkg string) bool {
	rel, _ := strings.CutPrefix(pkg, module)
	return rel == "orchestrator/edge" || strings.HasPrefix(rel, "orchestrator/edge/") || rel == "orchestrator/cmd/edge"
}

// TestEdgeImportsKernelOnly checks the edge's rule, on every non-test import of the
// edge's packages: they import the kernel and one another, and nothing else of the
// orchestrator (its domain, its store, its rate limits...) nor of the map server. The
// edge is its own process, which players stay connected through while the
// orchestrator restarts; what it shares with the orchestrator is a contract, and
// contracts live in the kernel.
func TestEdgeImportsKernelOnly(t *testing.T) {
	seen := 0
	for from, imps := range imports(t, "./orchestrator/...") {
		if !edgeTree(from) {
			continue
		}
		seen++
		for _, imp := range imps {
			if strings.HasPrefix(imp, module) && !edgeTree(imp) && tree(imp) != "kernel" {
				t.Errorf("%s imports %s: the edge imports only the kernel and its own packages", from, imp)
			}
		}
	}
	if seen < 2 {
		t.Errorf("go list found %d packages of the edge: the rule would check nothing", seen)
	}
}
