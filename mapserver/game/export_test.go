package game

// RestoreEquipment exposes restoreEquipment to the external tests: what the game does
// once a character's inventory is rebuilt from the orchestrator.
func (g *Game) RestoreEquipment(characterID string) { g.restoreEquipment(characterID) }
