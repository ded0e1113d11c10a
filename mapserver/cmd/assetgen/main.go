// Command assetgen draws mapyard's default asset set (mapserver/kernel/assets/defaultset)
// into a directory, replacing what was there:
//
//	go run ./mapserver/cmd/assetgen -out mapserver/kernel/assets/defaultset/set
//
// `go generate ./mapserver/kernel/assets/defaultset` runs it so.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mapyard/mapyard/mapserver/kernel/assets/defaultset"
)

func main() {
	out := flag.String("out", defaultset.Dir, "directory to write the set into (emptied first)")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "assetgen:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	files, err := defaultset.Generate()
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("empty %s: %w", dir, err)
	}
	var total int
	for p, data := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			return err
		}
		total += len(data)
	}
	fmt.Printf("assetgen: %d files, %d bytes in %s\n", len(files), total, dir)
	return nil
}
