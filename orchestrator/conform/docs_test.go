package conform_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocs_ConformanceTableListsEveryCheck reads the table of docs/map-contract.md's
// "Conformance" section: one row per check, in the order the kit runs them, so the page
// a map author reads says what the command prints.
func TestDocs_ConformanceTableListsEveryCheck(t *testing.T) {
	data, err := os.ReadFile("../../docs/map-contract.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Conformance\n")
	if !ok {
		t.Fatal(`docs/map-contract.md has no "## Conformance" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9-]+)` \\|")
	var rows []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		rows = append(rows, m[1])
	}
	if want := checkNames(); !slices.Equal(rows, want) {
		t.Errorf("the Conformance table lists %v, want %v", rows, want)
	}
}
