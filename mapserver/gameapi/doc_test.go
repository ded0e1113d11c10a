package gameapi_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docPath is the game API's guide, from this package.
const docPath = "../../docs/game-api.md"

// goBlock matches a Go snippet of the guide and the file it is taken from:
// "```go path" ... "```".
var goBlock = regexp.MustCompile("(?ms)^```go([^\n]*)\n(.*?)^```")

// TestDocs_GoSnippets: every Go snippet of docs/game-api.md names the file it comes
// from, and is that file's code as it stands (comment lines and blank lines aside):
// the build compiles and vets each of them where it lives. The line counts the guide
// gives of tag are the files' own.
func TestDocs_GoSnippets(t *testing.T) {
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlock.FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 5 {
		t.Fatalf("%d Go snippets in the guide: the rule checks nothing", len(blocks))
	}
	for i, b := range blocks {
		path := strings.TrimSpace(b[1])
		if path == "" {
			t.Errorf("snippet %d names no file:\n%s", i+1, b[2])
			continue
		}
		src, err := os.ReadFile(filepath.Join("../..", path))
		if err != nil {
			t.Errorf("snippet %d: %v", i+1, err)
			continue
		}
		if !excerpt(code(string(src)), code(b[2])) {
			t.Errorf("snippet %d is not the code of %s as it stands:\n%s", i+1, path, b[2])
		}
	}

	count := func(paths ...string) int {
		n := 0
		for _, p := range paths {
			src, err := os.ReadFile(filepath.Join("../..", p))
			if err != nil {
				t.Fatal(err)
			}
			n += strings.Count(string(src), "\n")
		}
		return n
	}
	game, bin := count("mapserver/tag/tag.go", "mapserver/tag/view.go"), count("mapserver/cmd/tagserver/main.go")
	for _, claim := range []string{
		fmt.Sprintf("Your game in %d lines: tag", game+bin),
		fmt.Sprintf("%d lines of Go", game),
		fmt.Sprintf("a %d-line binary", bin),
	} {
		if !strings.Contains(string(doc), claim) {
			t.Errorf("the guide does not say %q: tag's files changed, or the guide did", claim)
		}
	}
}

// code returns the lines of Go source that are code: no comment-only lines, no blank
// lines, no trailing spaces.
func code(src string) []string {
	var out []string
	for _, l := range strings.Split(src, "\n") {
		l = strings.TrimRight(l, " \t")
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "//") {
			continue
		}
		out = append(out, l)
	}
	return out
}

// excerpt reports whether part is a run of consecutive lines of whole.
func excerpt(whole, part []string) bool {
	for i := 0; i+len(part) <= len(whole); i++ {
		match := true
		for j := range part {
			if whole[i+j] != part[j] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}
