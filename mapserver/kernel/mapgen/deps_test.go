//go:build !js

package mapgen_test

import (
	"testing"

	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestBrowserSafeDeps fails if the generator or its wasm entry depend on a package that
// cannot or must not run in the browser.
func TestBrowserSafeDeps(t *testing.T) {
	tests := []struct {
		name string
		pkg  string
		env  []string
	}{
		{"Native", "github.com/mapyard/mapyard/mapserver/kernel/mapgen", nil},
		{"Wasm", "github.com/mapyard/mapyard/mapserver/kernel/mapgen", []string{"GOOS=js", "GOARCH=wasm"}},
		{"WasmEntry", "github.com/mapyard/mapyard/mapserver/cmd/client-wasm", []string{"GOOS=js", "GOARCH=wasm"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			testutil.RequireBrowserSafe(t, tt.env, tt.pkg)
		})
	}
}
