//go:build !js

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/mapgen"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// nodeScript loads the wasm module the way a browser page does (wasm_exec.js, then
// run), calls mapyardGenerate with a good and a bad config, and prints what it got.
const nodeScript = `
const fs = require("fs");
const [wasmExec, wasmPath, configPath] = process.argv.slice(2);
globalThis.require = require;
globalThis.fs = fs;
globalThis.path = require("path");
require(wasmExec);
const go = new Go();
WebAssembly.instantiate(fs.readFileSync(wasmPath), go.importObject).then(({instance}) => {
  go.run(instance);
  const good = globalThis.mapyardGenerate(fs.readFileSync(configPath, "utf8"));
  const bad = globalThis.mapyardGenerate('{"schemaVersion":1,"mapId":"Bad"}');
  const world = good.world ? JSON.parse(good.world) : {};
  process.stdout.write(JSON.stringify({
    hash: good.hash || "", error: good.error || "", mapId: world.mapId || "",
    props: (world.props || []).length, badError: bad.error || "",
  }));
  process.exit(0);
});
`

func TestMapyardGenerateInNode(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not in PATH: %v", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		testutil.Unavailable(t, "node not in PATH: the native-vs-WebAssembly comparison needs it")
	}
	dir := t.TempDir()
	wasm := filepath.Join(dir, "mapgen.wasm")
	build := exec.Command(goBin, "build", "-o", wasm, ".")
	build.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build wasm: %v\n%s", err, out)
	}
	goroot, err := exec.Command(goBin, "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	wasmExec := filepath.Join(strings.TrimSpace(string(goroot)), "lib", "wasm", "wasm_exec.js")

	cfg := mapgen.Default()
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "default.json")
	scriptPath := filepath.Join(dir, "run.js")
	if err := os.WriteFile(cfgPath, cfgJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(scriptPath, []byte(nodeScript), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(node, scriptPath, wasmExec, wasm, cfgPath).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var got struct {
		Hash, Error, MapID, BadError string
		Props                        int
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}

	w, err := mapgen.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got.Error != "" {
		t.Fatalf("mapyardGenerate(default) returned error %q", got.Error)
	}
	if want := w.Hash(); got.Hash != want {
		t.Fatalf("hash in node = %s, native = %s", got.Hash, want)
	}
	if got.MapID != "default" || got.Props != len(w.Props) {
		t.Fatalf("world JSON in node has mapId %q and %d props, want default and %d", got.MapID, got.Props, len(w.Props))
	}
	if !strings.Contains(got.BadError, "mapId") {
		t.Fatalf("mapyardGenerate(bad config) error = %q, want it to name mapId", got.BadError)
	}
}
