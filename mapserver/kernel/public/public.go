// Package public is mapyard's public door as players and their clients see it: the
// routes the edge serves and forwards to the orchestrator (a join, an identity's
// characters), what a join asks and answers, and where a map's WebSocket is. The
// player protocol on that WebSocket is package wire's (mapserver/wire), which the page
// runs as WebAssembly; everything a client of the kit calls before it is here.
package public

// PathJoin is the orchestrator's public join route.
const PathJoin = "/api/v1/join"

// PathCharacters is the public character API of an identity (Authorization: Bearer
// <authKey>): GET lists, POST creates; PathCharacters/{id}/select selects and DELETE
// PathCharacters/{id} deletes. The edge forwards it like joins.
const PathCharacters = "/api/v1/characters"

// MaxPlayerBody bounds the body of a player's call (a join, the character API), at the
// edge and at the orchestrator alike. It is far above any valid body (a few hundred
// bytes) on purpose: a name or key that is merely too long is refused for what it is
// (400 bad_request, naming the rule), and only a body no client would send is
// too_large (413).
const MaxPlayerBody = 64 << 10

// JoinRequest is the body of POST /api/v1/join.
type JoinRequest struct {
	AuthKey string `json:"authKey,omitempty"`
	// Name names the character created for an identity that owns none yet.
	Name string `json:"name,omitempty"`
	// CharacterID names which of the identity's characters to enter; empty enters the
	// selected one.
	CharacterID string `json:"characterId,omitempty"`
	// Rejoin is the rejoin credential of an earlier join's answer: it enters that
	// session's character again (a guest's too), wherever its lease is, from its last
	// pushed state. It is used once and replaces AuthKey, Name and CharacterID.
	Rejoin string `json:"rejoin,omitempty"`
}

// JoinResponse is the answer of POST /api/v1/join: a ticket for one map instance and
// where to connect with it.
type JoinResponse struct {
	Ticket      string `json:"ticket"`
	CharacterID string `json:"characterId"`
	Disposable  bool   `json:"disposable"`
	MapID       string `json:"mapId"`
	InstanceID  string `json:"instanceId"`
	WS          string `json:"ws"`
	ExpiresAtMs int64  `json:"expiresAtMs"`
	// Rejoin is the session's next rejoin credential (see JoinRequest.Rejoin): what a
	// client keeps in memory to come back after its map crashed.
	Rejoin string `json:"rejoin,omitempty"`
}

// WSPath is the public WebSocket path of a map instance, proxied by the edge; the edge
// routes WSPath(":id").
func WSPath(instanceID string) string { return "/maps/" + instanceID + "/ws" }

// CloseMapGone is the close code the edge ends a player's WebSocket with when the map's
// side of it ended without the map's close frame: the map process crashed or was
// killed, the edge's link to it broke, or its connection was reset. The map's own close
// codes (1000, 1001, 1008, 4000, ...) reach the client unchanged; this one is the
// edge's, and no map sends it. The map's resume token may have died with its process,
// so a client that gets it does not try a resume: it rejoins at once (POST PathJoin
// with the rejoin credential of its last join), which brings the character back on
// the same map if that map still runs, or on its restarted process from the state it
// last pushed.
//
// A map that dies in the middle of a frame cannot be followed by a close frame (it
// would be read as the rest of that frame): the edge then drops the connection
// without one, and the client sees an abnormal closure (1006).
const CloseMapGone = 4001
