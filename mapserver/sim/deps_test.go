//go:build !js

package sim_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestBrowserSafeDeps fails if the packages the browser runs for prediction and
// snapshot decoding (sim, wire, aoi) depend on a package that cannot or must not run
// there.
func TestBrowserSafeDeps(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("go command not in PATH")
	}
	forbidden := []string{"net", "os/exec", "github.com/docker/", "modernc.org/sqlite", "github.com/gorilla/"}
	for _, pkg := range []string{"sim", "wire", "aoi"} {
		for _, env := range [][]string{nil, {"GOOS=js", "GOARCH=wasm"}} {
			full := "github.com/mapyard/mapyard/mapserver/" + pkg
			t.Run(pkg+strings.Join(env, ","), func(t *testing.T) {
				cmd := exec.Command(goBin, "list", "-deps", full)
				cmd.Env = append(os.Environ(), env...)
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("go list -deps %s: %v", full, err)
				}
				deps := strings.Fields(string(out))
				if len(deps) < 3 {
					t.Fatalf("go list -deps printed only %q", deps)
				}
				for _, dep := range deps {
					for _, bad := range forbidden {
						if dep == bad || strings.HasPrefix(dep, strings.TrimSuffix(bad, "/")+"/") {
							t.Errorf("%s depends on %s", full, dep)
						}
					}
				}
			})
		}
	}
}
