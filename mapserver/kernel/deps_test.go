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

// TestHouseRules checks the one rule between the trees, on every non-test import of
// every package: the kernel imports neither tree; the map server and the orchestrator
// import each other only through the kernel. So each tree reads alone, with the kernel
// beside it, and a change inside one never reaches the other but through a contract.
func TestHouseRules(t *testing.T) {
	root := testutil.ModuleRoot(t)
	lines := testutil.GoList(t, root, nil, "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	seen := map[string]int{}
	for _, line := range lines {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		from := fields[0]
		seen[tree(from)]++
		for _, imp := range fields[1:] {
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
