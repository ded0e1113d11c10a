//go:build !js

package items_test

import (
	"strings"
	"testing"

	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestBrowserSafeDeps fails if the item rules, which the browser runs for encumbered
// prediction, depend on a package that cannot or must not run there, or on any mapyard
// package but the map generator: the orchestrator imports them too.
func TestBrowserSafeDeps(t *testing.T) {
	const pkg = "github.com/mapyard/mapyard/mapserver/kernel/items"
	for _, env := range [][]string{nil, {"GOOS=js", "GOARCH=wasm"}} {
		t.Run(strings.Join(env, ","), func(t *testing.T) {
			testutil.RequireBrowserSafe(t, env, pkg)
			for _, dep := range testutil.GoList(t, ".", env, "-deps", pkg) {
				if strings.HasPrefix(dep, "github.com/mapyard/") && dep != pkg && dep != "github.com/mapyard/mapyard/mapserver/kernel/mapgen" {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		})
	}
}
