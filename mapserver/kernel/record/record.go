// Package record holds the records the orchestrator keeps for its maps, exactly as maps
// send them, and the rules for their keys: a character's saved state, snapshot
// envelopes (version metadata, hash check, schema migrations), critical events and
// their acks, and the id rules every stored key and name follows. It is the leaf both
// the orchestrator's domain (the store interfaces of package orchestrator) and the map
// contract (mapserver/kernel/mapcontract, which names these types as its messages) build
// on, so the domain depends on no contract and the contract on no part of the
// orchestrator. It does no I/O and imports no mapyard package but apierr and the map
// generator's id rule.
package record
