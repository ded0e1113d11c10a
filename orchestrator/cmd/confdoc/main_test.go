package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/envconf"
	"github.com/mapyard/mapyard/mapserver/kernel/mapenv"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/edge"
)

const page = "../../../docs/configuration.md"

// TestPageMatchesStructs fails when docs/configuration.md and the configuration
// structs disagree on any variable's name, default or meaning.
func TestPageMatchesStructs(t *testing.T) {
	got, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	Write(&want)
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("docs/configuration.md is out of date with the configuration structs: run `make docs`")
	}
}

// TestEveryVariableDocumented checks the page lists every variable of every binary
// with its default and meaning, so that a change of Write cannot drop one.
func TestEveryVariableDocumented(t *testing.T) {
	var buf bytes.Buffer
	Write(&buf)
	out := buf.String()
	for _, cfg := range []any{orchestrator.Config{}, edge.Config{}, mapenv.Config{}} {
		for _, v := range envconf.Vars(cfg) {
			if v.Help == "" {
				t.Errorf("%s has no help text", v.Name)
			}
			row := "| `" + v.Name + "` | "
			if !strings.Contains(out, row) {
				t.Errorf("%s is not in the page", v.Name)
			}
		}
	}
}
