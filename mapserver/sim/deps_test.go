//go:build !js

package sim_test

import (
	"strings"
	"testing"

	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestBrowserSafeDeps fails if the packages the browser runs for prediction and
// snapshot decoding (sim, wire, aoi) depend on a package that cannot or must not run
// there.
func TestBrowserSafeDeps(t *testing.T) {
	for _, pkg := range []string{"sim", "wire", "aoi"} {
		for _, env := range [][]string{nil, {"GOOS=js", "GOARCH=wasm"}} {
			t.Run(pkg+strings.Join(env, ","), func(t *testing.T) {
				testutil.RequireBrowserSafe(t, env, "github.com/mapyard/mapyard/mapserver/"+pkg)
			})
		}
	}
}
