// Package kernel holds nothing itself: its sub-packages are the code both trees share,
// and the only code they share. The deterministic, WebAssembly-safe rules (mapgen, the
// world; items, the item rules; record, ids and the records maps send) and the
// contracts between the parts, one package per boundary (mapcontract, map and
// orchestrator both ways; edgelink, edge and map; routetable, edge and orchestrator;
// public, players and the kit; mapenv, a map container's
// environment; apierr and httpkit, the error envelope and the HTTP plumbing under
// them). The kernel imports neither tree, and the trees import each other only through
// it (deps_test.go).
package kernel
