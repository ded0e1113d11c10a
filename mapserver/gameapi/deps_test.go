package gameapi_test

import (
	"slices"
	"testing"

	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestHouse_GamesKnowTheAPIOnly: the game API and the games of the repository depend on
// none of the kit's runtime (the tick loop, the transport, the orchestrator link, the
// process around them): a game knows the API and the kit's libraries (sim, aoi, wire,
// the kernel), so a studio's game is written the same way, and the runtime may change
// under every game at once.
func TestHouse_GamesKnowTheAPIOnly(t *testing.T) {
	const m = "github.com/mapyard/mapyard/"
	runtime := []string{"mapserver/tickloop", "mapserver/app", "mapserver/ws", "mapserver/outbox", "mapserver/listen", "mapserver/client"}
	for _, pkg := range []string{"mapserver/gameapi", "mapserver/game", "mapserver/tag"} {
		deps := testutil.GoList(t, ".", nil, "-deps", "-f", "{{.ImportPath}}", m+pkg)
		if !slices.Contains(deps, m+"mapserver/sim") && pkg != "mapserver/gameapi" {
			t.Errorf("%s does not depend on the kit's movement: the rule lists the wrong packages", pkg)
		}
		for _, r := range runtime {
			if slices.Contains(deps, m+r) {
				t.Errorf("%s depends on %s, the kit's runtime", pkg, r)
			}
		}
	}
}
