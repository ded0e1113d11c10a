// Package mapserver is one map instance's authoritative server: it generates its static
// world from a MapConfig, runs the fixed-tick simulation, serves players over WebSockets
// and pushes state to the orchestrator, which it reaches through the control RPC. It
// never touches the database.
package mapserver

// Version identifies the map server's build; `make build` stamps it with -ldflags. The
// map reports it in MapReady and /health so the orchestrator can log which build runs.
var Version = "dev"
