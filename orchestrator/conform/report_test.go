package conform_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/orchestrator/conform"
)

// TestChecks_Names checks the check names are distinct, lowercase words joined by
// hyphens, each with its rule.
func TestChecks_Names(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z]+(-[a-z]+)*$`)
	seen := map[string]bool{}
	for _, c := range conform.Checks {
		if !valid.MatchString(c.Name) || seen[c.Name] || c.Rule == "" {
			t.Errorf("check %q: names must be distinct hyphenated lowercase words, each with a rule", c.Name)
		}
		seen[c.Name] = true
	}
}

// TestReport_Output checks the two forms of a report: a line per check and the counts
// alone on the last line, or one JSON document.
func TestReport_Output(t *testing.T) {
	rep := &conform.Report{Image: "example/map:1", Passed: 1, Failed: 1, Checks: []conform.Result{
		{Name: "map-ready", Pass: true, Ms: 812},
		{Name: "pushes", Detail: "no character push seen", Ms: 3},
	}}
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if got, want := text.String(), "PASS map-ready\nFAIL pushes: no character push seen\n1 passed, 1 failed\n"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"image":"example/map:1","checks":[{"name":"map-ready","pass":true,"ms":812},{"name":"pushes","pass":false,"detail":"no character push seen","ms":3}],"passed":1,"failed":1}`
	if string(b) != want {
		t.Errorf("json %s, want %s", b, want)
	}
	if rep.OK() || !slices.Equal(rep.Failures(), []string{"pushes"}) {
		t.Errorf("OK %v, failures %v", rep.OK(), rep.Failures())
	}
}
