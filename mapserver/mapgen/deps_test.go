//go:build !js

package mapgen_test

import (
	"strings"
	"testing"

	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestBrowserSafeDeps fails if the generator or its wasm entry depend on a package that
// cannot or must not run in the browser.
func TestBrowserSafeDeps(t *testing.T) {
	forbidden := []string{"net", "os/exec", "github.com/docker/", "modernc.org/sqlite", "github.com/gorilla/"}
	tests := []struct {
		name string
		pkg  string
		env  []string
	}{
		{"Native", "github.com/mapyard/mapyard/mapserver/mapgen", nil},
		{"Wasm", "github.com/mapyard/mapyard/mapserver/mapgen", []string{"GOOS=js", "GOARCH=wasm"}},
		{"WasmEntry", "github.com/mapyard/mapyard/mapserver/cmd/mapgen-wasm", []string{"GOOS=js", "GOARCH=wasm"}},
	}
	for _, tt := range tests {
		pkg := tt.pkg
		t.Run(tt.name, func(t *testing.T) {
			deps := testutil.GoList(t, ".", tt.env, "-deps", pkg)
			if len(deps) < 10 {
				t.Fatalf("go list -deps printed only %q", deps)
			}
			for _, dep := range deps {
				for _, bad := range forbidden {
					if dep == bad || strings.HasPrefix(dep, bad+"/") || strings.HasSuffix(bad, "/") && strings.HasPrefix(dep, bad) {
						t.Errorf("%s depends on %s", pkg, dep)
					}
				}
			}
		})
	}
}
