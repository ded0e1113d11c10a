// Players' names (docs/netcode.md, Players' names). Snapshots show players as entity
// ids; the page asks the map for the names of the players it sees and has no name for,
// a few at a time, and keeps what it learns for the session: entity ids belong to one
// map process, so a new session (another map, or a restarted one) starts afresh, and
// a resumed one keeps them.

const ASK_EVERY_MS = 300; // a query at most this often
const MAX_IDS = 64;       // ids per query (wire.MaxNamesPerQuery)
const KIND_PLAYER = 1;

export class Names {
  // session is the Session whose map is asked.
  constructor(session) {
    this.session = session;
    this.welcome = null;  // the welcome of the session the names belong to
    this.byId = new Map();  // entity id -> {name, characterId}
    this.byCharacter = new Map(); // character id -> name
    this.asked = new Set(); // entity ids asked, answered without a name, or waiting
    this.askedAt = -Infinity;
    this.unserved = false;  // the map does not know the query: it is not asked again
  }

  // current forgets the names of an earlier session.
  current() {
    const w = this.session.welcome;
    if (w === this.welcome) return;
    if (!(w && w.resumed)) {
      this.byId.clear();
      this.byCharacter.clear();
      this.asked.clear();
    }
    this.welcome = w;
  }

  // of is {name, characterId} of a player entity, once the map said it.
  of(id) {
    this.current();
    return this.byId.get(id);
  }

  // self is the player's own name, as its welcome says it.
  self() { return this.session.selfName(); }

  // ofCharacter is the name of a character: the player's own, or one the map said; "".
  ofCharacter(characterId) {
    this.current();
    const w = this.session.welcome;
    if (w && characterId === w.characterId) return this.self();
    return this.byCharacter.get(characterId) || "";
  }

  // ask sends one players/names query for the players in view not named yet, at most
  // every ASK_EVERY_MS. The query is kept with the session's commands, so that an error
  // naming its seq, or a lost connection, comes back through refused.
  ask(now) {
    this.current();
    const s = this.session;
    if (this.unserved || s.state !== "playing" || !s.ws || now - this.askedAt < ASK_EVERY_MS) return;
    const ids = [];
    for (const e of s.latest().values()) {
      if (e.kind !== KIND_PLAYER || e.id === s.selfId || this.byId.has(e.id) || this.asked.has(e.id)) continue;
      ids.push(e.id);
      if (ids.length === MAX_IDS) break;
    }
    if (!ids.length) return;
    this.askedAt = now;
    for (const id of ids) this.asked.add(id);
    const msg = { v: 1, kind: "command", seq: ++s.cmdSeq, feature: "players", action: "names", payload: { ids } };
    s.send(msg);
    s.commands.set(msg.seq, { seq: msg.seq, feature: "players", action: "names", payload: { ids } });
  }

  // learn keeps what a names event said, and settles its query.
  learn(d) {
    this.current();
    this.session.commands.delete(d.seq);
    for (const n of d.names || []) {
      this.byId.set(n.id, { name: n.name || "", characterId: n.characterId });
      if (n.name) this.byCharacter.set(n.characterId, n.name);
    }
  }

  // refused settles a query the map refused or lost with its connection: lost ids are
  // asked again; a map that does not know the query is not asked again.
  refused(cmd, err) {
    if (err && err.code === "unknown_command") this.unserved = true;
    else for (const id of cmd.payload.ids) this.asked.delete(id);
  }
}
