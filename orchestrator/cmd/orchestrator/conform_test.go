package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/orchestrator/conform"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
)

// TestRun_ConformFlags checks the subcommand's flags without running a check: help,
// a missing image, and an image the engine does not have (or no engine) are told apart
// from a failed check by exit status 2.
func TestRun_ConformFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"conform", "-h"}, nil, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "Usage: orchestrator conform --image IMAGE") {
		t.Errorf("conform -h: exit %d, %s", code, errOut.String())
	}
	if code := run([]string{"conform"}, nil, io.Discard, io.Discard); code != 2 {
		t.Errorf("conform without --image: exit %d, want 2", code)
	}
	errOut.Reset()
	if code := run([]string{"conform", "--image", "mapyard/no-such-image:none"}, nil, io.Discard, &errOut); code != 2 || !strings.Contains(errOut.String(), "orchestrator conform:") {
		t.Errorf("conform of a missing image: exit %d, %s", code, errOut.String())
	}
}

// TestRun_ConformKitImage runs `orchestrator conform` on the map image of this checkout
// and reads its output as a user does: a PASS line per check in order, then the counts
// alone on the last line, and exit status 0. (orchestrator/conform's tests check the
// failures, on an image broken on purpose.)
func TestRun_ConformKitImage(t *testing.T) {
	dockertest.Client(t)
	var out, errOut bytes.Buffer
	code := run([]string{"conform", "--image", dockertest.MapImage()}, nil, &out, &errOut)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if code != 0 || len(lines) != len(conform.Checks)+1 {
		t.Fatalf("exit %d, %d lines:\n%s\n%s", code, len(lines), out.String(), errOut.String())
	}
	for i, c := range conform.Checks {
		if lines[i] != "PASS "+c.Name {
			t.Errorf("line %d: %q, want %q", i+1, lines[i], "PASS "+c.Name)
		}
	}
	if got, want := lines[len(lines)-1], fmt.Sprintf("%d passed, 0 failed", len(conform.Checks)); got != want {
		t.Errorf("last line %q, want %q", got, want)
	}
}
