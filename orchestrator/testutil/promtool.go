package testutil

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// Promtool returns the path of Prometheus' promtool. Without it the test is
// Unavailable: it fails under RequireEnv (CI installs promtool with
// scripts/promtool.sh) and skips elsewhere, saying how to install it.
func Promtool(tb testing.TB) string {
	tb.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		Unavailable(tb, "promtool is not installed: run scripts/promtool.sh (Debian's prometheus package)")
	}
	return path
}

// CheckMetrics runs `promtool check metrics` on exposition (Prometheus' text format)
// and fails the test with promtool's findings unless it passes. what names the source.
func CheckMetrics(tb testing.TB, what string, exposition []byte) {
	tb.Helper()
	if len(bytes.TrimSpace(exposition)) == 0 {
		tb.Fatalf("%s: no metrics to check", what)
	}
	cmd := exec.Command(Promtool(tb), "check", "metrics")
	cmd.Stdin = bytes.NewReader(exposition)
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("promtool check metrics on %s: %v\n%s", what, err, strings.TrimSpace(string(out)))
	}
}
