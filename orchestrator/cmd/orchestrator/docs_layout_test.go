package main

import (
	"bufio"
	"bytes"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestDocs_ArchitectureRowPerPackage checks the package table of docs/architecture.md
// ("The house") against `go list ./...`: every package of the module has exactly one
// row, every row names a package of the module, and each row's last column lists
// exactly the module's packages that package imports (`go list -f '{{.Imports}}'`,
// test files left out). Paths are written in full (`mapserver/kernel/mapgen`), so a move that
// rewrites paths in text finds them; the order of a row's imports is free.
func TestDocs_ArchitectureRowPerPackage(t *testing.T) {
	root := testutil.ModuleRoot(t)
	pkgs := modulePackages(t, root)
	const file, section = "docs/architecture.md", "## The house"
	table := markdownTable(t, filepath.Join(root, file), section)
	col := slices.IndexFunc(table.header, func(h string) bool { return strings.Contains(h, "imports") })
	if col < 0 {
		t.Fatalf("%s:%d: the table of %q has no imports column: %q", file, table.line, section, table.header)
	}
	rows := map[string]int{}
	for _, r := range table.rows {
		names := codeSpans(r.cells[0])
		if len(names) != 1 {
			t.Errorf("%s:%d: the package cell %q must name one package in backticks", file, r.line, r.cells[0])
			continue
		}
		pkg := strings.TrimSuffix(names[0], "/")
		if prev, ok := rows[pkg]; ok {
			t.Errorf("%s:%d: a second row for %s (the first is at line %d)", file, r.line, pkg, prev)
			continue
		}
		rows[pkg] = r.line
		want, ok := pkgs[pkg]
		if !ok {
			t.Errorf("%s:%d: the row names %s, which is not a package of the module (go list ./...): fix its path or remove it", file, r.line, pkg)
			continue
		}
		if col >= len(r.cells) {
			t.Errorf("%s:%d: the row of %s has no imports cell", file, r.line, pkg)
			continue
		}
		got := codeSpans(r.cells[col])
		if missing, extra := setDiff(want, got), setDiff(got, want); len(missing) > 0 || len(extra) > 0 {
			t.Errorf("%s:%d: %s imports %s; the row says %s (missing %v, not imported %v)",
				file, r.line, pkg, importsCell(want), importsCell(got), missing, extra)
		}
	}
	for _, pkg := range slices.Sorted(maps.Keys(pkgs)) {
		if _, ok := rows[pkg]; !ok {
			t.Errorf("%s, %q: no row for the package %s; add | `%s` | what it holds | %s |",
				file, section, pkg, pkg, importsCell(pkgs[pkg]))
		}
	}
}

// TestDocs_ReadmeLayoutListsPackagesAndScripts checks the Layout table of the README:
// every package of the module (`go list ./...`) and every script under scripts/ (a
// file ending in .sh) has a row naming it in full in its first column, and every path
// a row names exists, as a package when it lies in one of the module's trees.
func TestDocs_ReadmeLayoutListsPackagesAndScripts(t *testing.T) {
	root := testutil.ModuleRoot(t)
	pkgs := modulePackages(t, root)
	const file, section = "README.md", "## Layout"
	table := markdownTable(t, filepath.Join(root, file), section)
	listed := map[string]int{}
	for _, r := range table.rows {
		for _, name := range codeSpans(r.cells[0]) {
			listed[strings.TrimSuffix(name, "/")] = r.line
		}
	}
	trees := map[string]bool{}
	for pkg := range pkgs {
		top, _, _ := strings.Cut(pkg, "/")
		trees[top] = true
	}
	for _, name := range slices.Sorted(maps.Keys(listed)) {
		line := listed[name]
		info, err := os.Stat(filepath.Join(root, filepath.FromSlash(name)))
		top, _, _ := strings.Cut(name, "/")
		_, isPkg := pkgs[name]
		switch {
		case err != nil:
			t.Errorf("%s:%d: the row names %s, which does not exist: fix its path or remove it", file, line, name)
		case info.IsDir() && trees[top] && top != "docs" && !isPkg: // docs/ holds one package and the docs
			t.Errorf("%s:%d: the row names %s, which is not a package of the module (go list ./...): fix its path or remove it", file, line, name)
		}
	}
	for _, pkg := range slices.Sorted(maps.Keys(pkgs)) {
		if _, ok := listed[pkg]; !ok {
			t.Errorf("%s, %q: no row for the package %s; add | `%s` | what it is |", file, section, pkg, pkg)
		}
	}
	scripts := scriptFiles(t, root)
	if len(scripts) == 0 {
		t.Fatal("no script found under scripts/: the rule would check nothing")
	}
	for _, s := range scripts {
		if _, ok := listed[s]; !ok {
			t.Errorf("%s, %q: no row for the script %s; add | `%s` | what it does |", file, section, s, s)
		}
	}
}

// modulePackages returns every package of the module by its path inside the module
// (mapserver/kernel/mapgen), each with the packages of the module it imports, as `go list`
// sees them on this host (test files left out).
func modulePackages(t *testing.T, root string) map[string][]string {
	t.Helper()
	module := testutil.GoList(t, root, nil, "-m", "-f", "{{.Path}}")[0]
	rel := func(path string) (string, bool) {
		if path == module {
			return ".", true
		}
		r, ok := strings.CutPrefix(path, module+"/")
		return r, ok
	}
	pkgs := map[string][]string{}
	// One field a package: its path, "=", then its imports joined by commas (import
	// paths hold no spaces or commas).
	for _, field := range testutil.GoList(t, root, nil, "-f", `{{.ImportPath}}={{join .Imports ","}}`, "./...") {
		path, imports, _ := strings.Cut(field, "=")
		pkg, ok := rel(path)
		if !ok {
			t.Fatalf("go list ./... printed %s, outside the module %s", path, module)
		}
		var own []string
		for _, imp := range strings.Split(imports, ",") {
			if r, ok := rel(imp); ok && imp != "" {
				own = append(own, r)
			}
		}
		pkgs[pkg] = own
	}
	if len(pkgs) < 2 {
		t.Fatalf("go list ./... found %d packages: the rule would check nothing", len(pkgs))
	}
	return pkgs
}

// scriptFiles returns the scripts under root/scripts (files ending in .sh), by their
// slash-separated path from root.
func scriptFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(root, "scripts"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".sh") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mdTable is the first Markdown table of a section: its header cells and its rows.
type mdTable struct {
	line   int // of the header row
	header []string
	rows   []mdRow
}

// mdRow is one row of an mdTable, with the line it is on.
type mdRow struct {
	line  int
	cells []string
}

// markdownTable returns the first table after the heading line section (for example
// "## Layout") of the Markdown file path, before the next heading of any level. It
// fails the test when there is no such heading or table.
func markdownTable(t *testing.T, path, section string) mdTable {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var table mdTable
	in, found := false, false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == section:
			in, found = true, true
		case !in:
		case strings.HasPrefix(line, "#"):
			in = false
		case strings.HasPrefix(line, "|") && table.header == nil:
			table.line, table.header = n, tableCells(line)
		case strings.HasPrefix(line, "|") && table.header != nil:
			if cells := tableCells(line); !isSeparator(cells) {
				table.rows = append(table.rows, mdRow{line: n, cells: cells})
			}
		case table.header != nil:
			in = false
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatalf("%s has no heading %q", path, section)
	}
	if len(table.rows) == 0 {
		t.Fatalf("%s, %q: no table found", path, section)
	}
	return table
}

// tableCells splits a table row into its trimmed cells, at the pipes outside code
// spans.
func tableCells(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	var cur strings.Builder
	code := false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '`':
			code = !code
			cur.WriteByte(c)
		case c == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteByte('|')
			i++
		case c == '|' && !code:
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// isSeparator reports whether cells are a table's header separator (|---|:--:|).
func isSeparator(cells []string) bool {
	for _, c := range cells {
		if strings.Trim(c, "-: ") != "" {
			return false
		}
	}
	return true
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// codeSpans returns the text of every code span of a cell, in order.
func codeSpans(cell string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// importsCell writes a list of packages as an imports cell: code spans joined by
// commas, or "none".
func importsCell(pkgs []string) string {
	if len(pkgs) == 0 {
		return "none"
	}
	return "`" + strings.Join(pkgs, "`, `") + "`"
}

// setDiff returns the elements of a that are not in b, sorted.
func setDiff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return out
}
