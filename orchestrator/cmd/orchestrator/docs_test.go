package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mapyard/mapyard/docs/schemas"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// illustrativeMarker, on the line before a fenced shell block, says the block is shown,
// not run by TestDocs_ShellExamples (it needs a `make up` kit, a fresh host, or fixed
// ports); the reason follows the marker.
const illustrativeMarker = "<!-- doc-test: illustrative"

// docBlock is one fenced block of a Markdown file.
type docBlock struct {
	file, info, body string
	line             int
	illustrative     bool
}

// docBlocks returns the fenced blocks of the README and of every page in docs/.
func docBlocks(t *testing.T) []docBlock {
	t.Helper()
	files, err := filepath.Glob("../../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []docBlock
	for _, f := range append([]string{"../../../README.md"}, files...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cur *docBlock
		prev := ""
		sc := bufio.NewScanner(bytes.NewReader(data))
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			switch {
			case cur == nil && strings.HasPrefix(line, "```") && len(line) > 3:
				cur = &docBlock{file: filepath.Base(f), info: strings.TrimPrefix(line, "```"), line: n,
					illustrative: strings.HasPrefix(prev, illustrativeMarker)}
			case cur != nil && strings.HasPrefix(line, "```"):
				out = append(out, *cur)
				cur = nil
			case cur != nil:
				cur.body += line + "\n"
			}
			if strings.TrimSpace(line) != "" {
				prev = strings.TrimSpace(line)
			}
		}
	}
	return out
}

// TestDocs_ShellExamples runs every shell example of the README and docs/ that is not
// marked illustrative, against a kit of the real binaries as the end-to-end tests start
// them: an orchestrator process with real map containers and the edge in front of it,
// all on ports of their own and under a deployment of their own. The examples' fixed
// addresses and instance ids are rewritten to the kit's; each block must exit 0 (the
// examples use `curl -f`, so an answer other than 2xx fails it).
func TestDocs_ShellExamples(t *testing.T) {
	var run []docBlock
	for _, b := range docBlocks(t) {
		switch lang, _, _ := strings.Cut(b.info, " "); lang {
		case "sh", "bash", "shell":
			if !b.illustrative {
				run = append(run, b)
			}
		}
	}
	if len(run) == 0 {
		t.Fatal("no runnable shell example found")
	}
	cli := dockertest.Client(t)
	deployment := "test-" + randomHex(t, 4)
	t.Cleanup(func() { dockertest.RemoveDeployment(t, cli, deployment) })
	secret := randomHex(t, 16)
	def := deployment + "-d"
	env := childEnv(deployment, "127.0.0.1:"+strconv.Itoa(testutil.FreePort(t)), filepath.Join(t.TempDir(), "mapyard.db"), secret,
		"ORCH_DEFAULT_INSTANCE_ID="+def, "ORCH_WARM_POOL_SIZE=1", "ORCH_MAP_PROBE_MS=300", "MAP_HEARTBEAT_MS=300",
		// A container start takes a few hundred milliseconds, but minutes on an engine
		// shared with other suites: the examples wait for it rather than fail.
		"ORCH_MAP_START_TIMEOUT_MS=120000")
	orch := startOrchestrator(t, env)
	waitStatus(t, orch.public+"/readyz", http.StatusOK, 60*time.Second)
	e := openEdge(t, orch.control, orch.edgeCredential)

	host := func(u string) string { return strings.TrimPrefix(u, "http://") }
	rewrite := strings.NewReplacer(
		"localhost:8080", host(e.PublicURL()),
		"127.0.0.1:8080", host(e.PublicURL()),
		"127.0.0.1:9101", host(e.MetricsURL()),
		"127.0.0.1:8081", host(orch.public),
		"127.0.0.1:9000", host(orch.control),
		"mapyard-map-default-1", docker.ContainerName(deployment, def),
		"mapyard-map-forest-1", docker.ContainerName(deployment, deployment+"-f1"),
		"default-1", def,
		"forest-1", deployment+"-f1",
	)
	for _, b := range run {
		t.Run(fmt.Sprintf("%s:%d", b.file, b.line), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", rewrite.Replace(b.body))
			cmd.Env = append(os.Environ(), "S="+secret)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s line %d failed: %v\n--- script\n%s--- output\n%s", b.file, b.line, err, rewrite.Replace(b.body), out)
			}
		})
	}
}

// TestDocs_ContractExamples decodes every JSON example of docs/map-contract.md into the
// Go type its block names (```json mapcontract.MapReady), strictly, checks the example
// shows every field of the type, and validates it against the message's JSON Schema in
// docs/schemas, so the contract page can drift neither from the wire nor from the
// schemas a map author validates against.
func TestDocs_ContractExamples(t *testing.T) {
	set, err := schemas.Load()
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]struct {
		proto  any
		schema string
	}{
		"httpkit.ErrorResponse":             {httpkit.ErrorResponse{}, schemas.ErrorAnswer},
		"mapcontract.MapReady":              {mapcontract.MapReady{}, "orch/map-ready.request.json"},
		"mapcontract.Heartbeat":             {mapcontract.Heartbeat{}, "orch/map-heartbeat.request.json"},
		"mapcontract.HeartbeatAnswer":       {mapcontract.HeartbeatAnswer{}, "orch/map-heartbeat.answer.json"},
		"mapcontract.RedeemRequest":         {mapcontract.RedeemRequest{}, "orch/redeem.request.json"},
		"mapcontract.RedeemResult":          {mapcontract.RedeemResult{}, "orch/redeem.answer.json"},
		"mapcontract.TransferRequest":       {mapcontract.TransferRequest{}, "orch/request-transfer.request.json"},
		"mapcontract.TransferAnswer":        {mapcontract.TransferAnswer{}, "orch/request-transfer.answer.json"},
		"mapcontract.TransferResult":        {mapcontract.TransferResult{}, "orch/transfer-result.request.json"},
		"mapcontract.PersistSnapshot":       {mapcontract.PersistSnapshot{}, "orch/persist-snapshot.request.json"},
		"mapcontract.PersistSnapshotAnswer": {mapcontract.PersistSnapshotAnswer{}, "orch/persist-snapshot.answer.json"},
		"record.CriticalEvent":              {record.CriticalEvent{}, "orch/persist-critical-event.request.json"},
		"record.CriticalAck":                {record.CriticalAck{}, "orch/persist-critical-event.answer.json"},
		"mapcontract.CriticalBatch":         {mapcontract.CriticalBatch{}, "orch/persist-critical-events.request.json"},
		"mapcontract.CriticalBatchAnswer":   {mapcontract.CriticalBatchAnswer{}, "orch/persist-critical-events.answer.json"},
		"mapcontract.CharacterItemsRequest": {mapcontract.CharacterItemsRequest{}, "orch/character-items.request.json"},
		"mapcontract.CharacterItemsAnswer":  {mapcontract.CharacterItemsAnswer{}, "orch/character-items.answer.json"},
		"mapcontract.InstanceItemsRequest":  {mapcontract.InstanceItemsRequest{}, "orch/instance-items.request.json"},
		"mapcontract.InstanceItemsAnswer":   {mapcontract.InstanceItemsAnswer{}, "orch/instance-items.answer.json"},
		"mapcontract.ItemPoliciesRequest":   {mapcontract.ItemPoliciesRequest{}, "orch/item-policies.request.json"},
		"mapcontract.ItemPoliciesAnswer":    {mapcontract.ItemPoliciesAnswer{}, "orch/item-policies.answer.json"},
		"mapcontract.MapHealth":             {mapcontract.MapHealth{}, "control/health.answer.json"},
		"mapcontract.StartInstance":         {mapcontract.StartInstance{}, "control/start-instance.request.json"},
		"mapcontract.Handoff":               {mapcontract.Handoff{}, "control/handoff.request.json"},
		"mapcontract.HandoffAnswer":         {mapcontract.HandoffAnswer{}, "control/handoff.answer.json"},
	}
	seen := map[string]bool{}
	for _, b := range docBlocks(t) {
		lang, name, _ := strings.Cut(b.info, " ")
		if b.file != "map-contract.md" || lang != "json" {
			continue
		}
		typ, ok := types[name]
		if !ok {
			t.Errorf("map-contract.md:%d: block names unknown type %q", b.line, name)
			continue
		}
		seen[name] = true
		v := reflect.New(reflect.TypeOf(typ.proto))
		dec := json.NewDecoder(strings.NewReader(b.body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v.Interface()); err != nil {
			t.Errorf("map-contract.md:%d: %s: %v", b.line, name, err)
			continue
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal([]byte(b.body), &fields); err != nil {
			t.Fatal(err)
		}
		for _, f := range jsonFields(reflect.TypeOf(typ.proto)) {
			if _, ok := fields[f]; !ok && !optionalInExample[name+"."+f] {
				t.Errorf("map-contract.md:%d: %s example lacks field %q", b.line, name, f)
			}
		}
		if err := set.Validate(typ.schema, []byte(b.body)); err != nil {
			t.Errorf("map-contract.md:%d: %s example breaks its schema: %v", b.line, name, err)
		}
	}
	for name := range types {
		if !seen[name] {
			t.Errorf("map-contract.md has no example of %s", name)
		}
	}
}

// optionalInExample are fields an example leaves out on purpose (the text says when
// they appear).
var optionalInExample = map[string]bool{
	"mapcontract.TransferRequest.toInstanceId": true, // the example names the map
	"mapcontract.TransferRequest.handoff":      true, // a portal's; /control/handoff's section has a handoff's
}

// jsonFields returns the top-level JSON names of struct type t.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}
