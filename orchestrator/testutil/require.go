package testutil

import (
	"os"
	"testing"
)

// RequireEnv is the variable that turns a missing real dependency (a Docker engine,
// node) from a skip into a failure. CI and `make test` set it: a run that must prove
// something never passes by skipping the test that proves it.
const RequireEnv = "MAPYARD_REQUIRE_DOCKER"

// Unavailable ends a test whose real dependency is missing: it fails when RequireEnv
// is "1" and otherwise skips, saying why and how to make it fail instead.
func Unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if os.Getenv(RequireEnv) == "1" {
		tb.Fatalf(format, args...)
	}
	tb.Skipf(format+" (set "+RequireEnv+"=1 to fail instead)", args...)
}
