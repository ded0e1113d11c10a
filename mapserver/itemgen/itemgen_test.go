//go:build !js

package itemgen_test

import (
	"testing"

	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestBrowserSafeDeps fails if the placement, which the browser runs, depends on a
// package that cannot or must not run there.
func TestBrowserSafeDeps(t *testing.T) {
	testutil.RequireBrowserSafe(t, []string{"GOOS=js", "GOARCH=wasm"}, "github.com/mapyard/mapyard/mapserver/itemgen")
}
