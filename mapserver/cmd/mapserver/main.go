// Command mapserver runs one map instance of the kit's reference game
// (mapserver/game). The orchestrator starts it as a container; map developers run it
// alone against a fake orchestrator.
//
// Usage:
//
//	mapserver              run, configured by MAP_* environment variables
//	mapserver healthcheck  exit 0 if the local map server answers /health
//	mapserver -h           list every variable with its default
//
// The MAP_FAULT_* variables of the supervisor's tests are app.Binary's.
package main

import (
	"io"
	"os"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/app"
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

func run(args, environ []string, stdout, stderr io.Writer) int {
	return app.Binary{Name: "mapserver", Title: "mapyard map server " + mapserver.Version}.Run(args, environ, stdout, stderr)
}
