package game

import "github.com/mapyard/mapyard/mapserver/kernel/items"

// Carry exposes carry to the external tests: the inventory a character arrives with
// (gameapi.Arrival.Items), given again as the orchestrator would at a later arrival.
func (g *Game) Carry(characterID string, held []items.Item) { g.carry(characterID, held) }
