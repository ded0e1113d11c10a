// Command edge is mapyard's public door: the page, joins (forwarded to the
// orchestrator) and players' WebSockets (proxied to their maps). It runs as its own
// process so that players stay connected while the orchestrator restarts. The
// orchestrator image runs the same code as `orchestrator edge`.
//
// Usage:
//
//	edge              run, configured by EDGE_* environment variables
//	edge healthcheck  exit 0 if the local edge answers /healthz
//	edge -h           list every variable with its default
package main

import (
	"os"

	"github.com/mapyard/mapyard/orchestrator/edge"
)

func main() {
	os.Exit(edge.Run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}
