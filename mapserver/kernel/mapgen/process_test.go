//go:build !js

package mapgen_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
)

// childOutEnv, when set, makes TestGenerateChildProcess write the default world's
// canonical encoding to the named file instead of testing anything.
const childOutEnv = "MAPYARD_MAPGEN_CHILD_OUT"

func TestGenerateChildProcess(t *testing.T) {
	out := os.Getenv(childOutEnv)
	if out == "" {
		t.Skip("helper for TestGenerate_DeterministicAcrossProcesses")
	}
	if err := os.WriteFile(out, canonical(t, mustGenerate(t, mapgen.Default())), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestGenerate_DeterministicAcrossProcesses(t *testing.T) {
	out := filepath.Join(t.TempDir(), "world.bin")
	cmd := exec.Command(os.Args[0], "-test.run=^TestGenerateChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), childOutEnv+"="+out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child process: %v\n%s", err, msg)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := canonical(t, mustGenerate(t, mapgen.Default()))
	if len(want) < 100_000 {
		t.Fatalf("canonical encoding is only %d bytes", len(want))
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("child process generated %d different bytes than this one (%d)", len(got), len(want))
	}
}
