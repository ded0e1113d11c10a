// Package testutil holds the helpers mapyard's tests share: running `go list` for the
// dependency rules, and JSON calls against a test server. It is imported by tests only.
package testutil

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// GoList runs `go list args...` in dir with env added to the environment and returns
// the printed fields. It fails the test when go is missing or go list fails, and when it
// prints nothing, so a dependency rule never passes by checking no package.
func GoList(tb testing.TB, dir string, env []string, args ...string) []string {
	tb.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		tb.Fatalf("go command not in PATH: %v", err)
	}
	cmd := exec.Command(goBin, append([]string{"list"}, args...)...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			tb.Fatalf("go list %v: %v\n%s", args, err, ee.Stderr)
		}
		tb.Fatalf("go list %v: %v", args, err)
	}
	fields := strings.Fields(string(out))
	if len(fields) == 0 {
		tb.Fatalf("go list %v printed nothing", args)
	}
	return fields
}

// ModuleRoot returns the directory holding mapyard's go.mod.
func ModuleRoot(tb testing.TB) string {
	tb.Helper()
	return filepath.Dir(GoList(tb, ".", nil, "-m", "-f", "{{.GoMod}}")[0])
}

// RequireBrowserSafe fails tb if pkg, listed with env added (GOOS=js GOARCH=wasm for the
// browser's build), depends on a package that cannot or must not run in a browser: the
// network stack, processes, Docker, SQLite or gorilla. Code the browser runs (the map
// generator, the simulation's movement, the wire format) is guarded by it.
func RequireBrowserSafe(tb testing.TB, env []string, pkg string) {
	tb.Helper()
	forbidden := []string{"net", "os/exec", "github.com/docker", "modernc.org/sqlite", "github.com/gorilla"}
	deps := GoList(tb, ".", env, "-deps", pkg)
	if len(deps) < 3 {
		tb.Fatalf("go list -deps %s printed only %q", pkg, deps)
	}
	for _, dep := range deps {
		for _, bad := range forbidden {
			if dep == bad || strings.HasPrefix(dep, bad+"/") {
				tb.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}
