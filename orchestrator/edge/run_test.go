package edge_test

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/orchestrator/edge"
)

func TestRun_Help(t *testing.T) {
	var out bytes.Buffer
	if code := edge.Run([]string{"-h"}, nil, &out, io.Discard); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	for _, v := range []string{
		"EDGE_PUBLIC_ADDR", "EDGE_METRICS_ADDR", "EDGE_ORCH_URL", "EDGE_CREDENTIAL_FILE", "EDGE_MAX_CONNS",
		"EDGE_IDLE_TIMEOUT_MS", "EDGE_DRAIN_TIMEOUT_MS", "EDGE_PROCS", "EDGE_STATIC_ROUTES", ":8080",
		"EDGE_HANDOVER_SOCKET", "EDGE_HANDOVER_SPREAD_MS",
	} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("help does not list %s", v)
		}
	}
}

func TestRun_InvalidConfig(t *testing.T) {
	for _, env := range []string{
		"EDGE_MAX_CONNS=0", "EDGE_ORCH_URL=ftp://x", "EDGE_STATIC_ROUTES=1=port", "EDGE_PUBLIC_ADDR=8080", "EDGE_HANDOVER_SPREAD_MS=-1",
	} {
		var stderr bytes.Buffer
		if code := edge.Run(nil, []string{env}, io.Discard, &stderr); code == 0 {
			t.Fatalf("%s: exit code 0", env)
		}
		name, _, _ := strings.Cut(env, "=")
		if !strings.Contains(stderr.String(), name) {
			t.Errorf("%s: message does not name the variable: %s", env, stderr.String())
		}
	}
}
