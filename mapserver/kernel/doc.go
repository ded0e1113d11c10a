// Package kernel holds nothing itself: its sub-packages are the code both trees share,
// and the only code they share. The deterministic, WebAssembly-safe rules (mapgen, the
// world; items, the item rules; record, ids and the records maps send) and the
// contracts between the parts (mapcontract and mapcontrol, map and orchestrator;
// edgelink, edge and map; edgeapi, the public routes; mapenv, a map container's
// environment; apierr and httpkit, the error envelope and the HTTP plumbing under
// them). The kernel imports neither tree, and the trees import each other only through
// it (deps_test.go).
package kernel
