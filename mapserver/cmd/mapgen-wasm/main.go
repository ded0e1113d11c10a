//go:build js && wasm

// Command mapgen-wasm exposes the map generator to the browser. Loaded with Go's
// wasm_exec.js, it defines the global function
//
//	mapyardGenerate(mapConfigJSON: string) -> {world: string, hash: string} | {error: string}
//
// where world is the world's JSON (see mapgen.World.MarshalJSON) and hash the hex
// SHA-256 of its canonical encoding, to compare with the hash in the map server's
// welcome message.
package main

import (
	"encoding/json"
	"syscall/js"

	"github.com/mapyard/mapyard/mapserver/mapgen"
)

func main() {
	js.Global().Set("mapyardGenerate", js.FuncOf(generate))
	select {} // keep the Go runtime alive for later calls
}

func generate(_ js.Value, args []js.Value) any {
	if len(args) != 1 || args[0].Type() != js.TypeString {
		return failure("mapyardGenerate takes one argument: the MapConfig as a JSON string")
	}
	world, hash, err := run(args[0].String())
	if err != nil {
		return failure(err.Error())
	}
	return map[string]any{"world": world, "hash": hash}
}

func run(configJSON string) (world, hash string, err error) {
	c, err := mapgen.Parse([]byte(configJSON))
	if err != nil {
		return "", "", err
	}
	w, err := mapgen.Generate(c)
	if err != nil {
		return "", "", err
	}
	data, err := json.Marshal(w)
	if err != nil {
		return "", "", err
	}
	return string(data), w.Hash(), nil
}

func failure(msg string) map[string]any { return map[string]any{"error": msg} }
