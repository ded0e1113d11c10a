// The player's connection to the game, following docs/netcode.md: join through the
// edge, hello with the ticket, decode binary snapshots with the server's own decoder
// (WASM), send the movement inputs gathered since the last snapshot in one batch that
// carries that snapshot's ack (at most one message per snapshot received), predict
// the player's own movement with the server's movement code and reconcile it on every
// snapshot, keep a short buffer of snapshots for interpolating everyone else, follow
// portals, and come back by itself after a dropped connection: resume inside the resume
// window, else rejoin the same character with the orchestrator's rejoin credential
// (which outlives a crashed map), else join again with the same identity. A connection
// the edge closed because its map went away (MAP_GONE) rejoins at once: the map's
// resume token went with its process.

import { closed } from "./words.js";
import { othersAt, periodOf, recordTrack } from "./interpolate.js";

// Reconnect attempts back off from 200 ms to 500 ms (±20 %): a crashed map is back
// within about half a second of being ready.
const RECONNECT_MIN_MS = 200;
const RECONNECT_MAX_MS = 500;
const PING_EVERY_MS = 1000;
// The close code of a connection whose map's side ended without a close frame (a
// crashed or killed map, a broken link): the edge's public.CloseMapGone.
const MAP_GONE = 4001;
const MAX_BATCH = 32;     // the server refuses larger batches (too_many_inputs)
const MAX_PENDING = 32;   // unacknowledged inputs (a second at 30 Hz): past that the link is too slow to play
const SNAPSHOT_BUFFER = 32;
// A player who sends no input acknowledges every snapshot that changed its view, so that
// no change is sent twice, and one that changed nothing only after IDLE_ACK_QUIET of them
// (the map keeps baselines for 16): an idle crowd where nothing moves acks an eighth.
const IDLE_ACK_QUIET = 8;
// Inputs gathered wait for the next snapshot and leave with its ack; when none came for
// 66.7 ms (a snapshot interval at the default 15 Hz, whatever the map's rate, so that a
// batch stays far inside the map's jitter buffer) since the last batch or snapshot, they
// leave at the next input (docs/netcode.md: Commands and acks).
const BATCH_IDLE_MS = 1000 / 15;

// Connection states, as the status line and the overlay show them.
export const State = {
  idle: "idle", joining: "joining", connecting: "connecting", playing: "playing",
  transferring: "transferring", reconnecting: "reconnecting", stopped: "stopped", error: "error",
};

// Events of the game (items, trades, equipment, NPCs) handed to the hooks' onGame.
const GAME_EVENTS = new Set(["inventory", "item_picked", "item_dropped", "trade_offered", "item_traded",
  "trade_declined", "item_consumed", "equip_result", "item_recovered", "npc_state", "names"]);
// Commands kept for their answer (an ack or an error naming their seq), at most this many.
const MAX_COMMANDS = 64;

// Codes of a refused hello after which joining again is the way back.
const REJOIN = new Set(["ticket_invalid", "ticket_expired", "ticket_used", "wrong_map"]);

export class Session {
  // wasm is the module's API (globalThis.mapyard); identity {authKey?} (no key: a
  // guest); hooks: onState(state, detail), onWorld(world, welcome), onEvent(text, kind),
  // onGame(event) for the game's events, onAnswer(command, error) when a command other
  // than movement is acknowledged (error null) or refused.
  constructor(wasm, identity, hooks) {
    this.wasm = wasm;
    this.identity = identity;
    this.hooks = hooks;
    this.state = State.idle;
    this.ws = null;
    this.welcome = null;
    this.world = null;          // the loaded world (mapyard.loadWorld's answer)
    this.worldError = "";       // a hash mismatch, shown and never ignored
    this.decoder = 0;
    this.resume = null;         // {token, until}
    this.rejoinCred = null;     // the orchestrator's rejoin credential of this session (used once)
    this.cmdSeq = 0;
    this.inputSeq = 0;
    this.pending = [];          // inputs predicted and not yet applied by the server
    this.sentSeq = 0;           // the newest input seq sent: pending inputs above it wait for a snapshot
    this.heardAt = 0;           // performance.now() of the last snapshot or input batch
    this.ackTick = 0;           // newest snapshot tick decoded
    this.unacked = 0;           // snapshots decoded since the last ack sent
    this.ackChanged = false;    // one of them changed the view
    this.snapshots = [];        // [{tick, time, entities: Map(id -> {kind, x, y, slot})}]
    this.tracks = new Map();    // entity id -> {points: [{time, x, y}], extra}: see track
    this.selfId = 0;
    this.server = null;         // own position in the newest snapshot (quanta)
    this.predicted = null;      // own predicted position (quanta)
    this.previous = null;       // the predicted position one input earlier
    this.lastStepAt = 0;
    this.correction = { x: 0, y: 0 }; // visible rest of the last reconcile, decaying
    this.clockOffset = null;    // performance.now() - tick time, smoothed
    this.reconnectDelay = RECONNECT_MIN_MS;
    this.timers = new Set();
    this.inventory = null;      // the newest inventory event's data
    this.viewCap = null;        // {shown, inView} while the map caps what the snapshots show
    this.commands = new Map();  // seq -> {seq, feature, action, payload} awaiting an answer
    this.itemIds = new Map();   // item entity id -> item id, learned from item events
    this.seeded = new Map();    // "template:x:y" -> item id of the items the map's generator placed
    this.stats = { rtt: 0, sent: 0, batches: 0, messages: 0, received: 0, acked: 0, snapshots: [], bytes: [], predictionError: 0, corrections: [],
      maxPredictionError: 0, lastTick: 0, reconnects: 0, transfers: 0, rejoins: 0, resumes: 0, mapsGone: 0, moves: 0,
      welcomedAt: 0, movedAt: 0 }; // wall-clock ms of the last welcome and of the first move after it
  }

  // start joins the game.
  start() { this.join(); }

  // stop closes the connection for good (another tab took the character over, or the
  // page is leaving).
  stop(reason) {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    if (this.ws) { this.ws.onclose = null; this.ws.close(1000); this.ws = null; }
    this.setState(State.stopped, reason || "");
  }

  setState(s, detail = "") {
    this.state = s;
    this.hooks.onState(s, detail);
  }

  later(fn, ms) {
    if (this.left) return; // nothing is retried for a player who went to the menu
    const t = setTimeout(() => { this.timers.delete(t); fn(); }, ms);
    this.timers.add(t);
  }

  // join asks the edge for a ticket: with the session's rejoin credential the same
  // character (a guest's too, from its last pushed state), else the character of the
  // key (or a new guest). Whether to try again is read from the answer's status, never
  // from a list of codes: a 4xx is the server's final word on what was sent, so a
  // refused rejoin credential is dropped at once for a plain join, and a refused plain
  // join ends the session with the server's message (the page goes back to the menu);
  // a 5xx, 429 (after its Retry-After) or no answer at all is tried again.
  async join() {
    if (this.state !== State.reconnecting) this.setState(State.joining);
    const rejoin = this.rejoinCred;
    let body = { rejoin };
    if (!rejoin) {
      body = this.identity.authKey ? { authKey: this.identity.authKey } : {};
      Object.assign(body, this.identity.joinExtra || {});
    }
    let r = null, answer = null, failure = "";
    try {
      r = await fetch("/api/v1/join", {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
      });
      answer = await r.json().catch(() => null);
    } catch (err) {
      failure = String(err.message || err);
    }
    if (this.state === State.stopped) return;
    if (r && r.ok && answer && answer.ws) {
      this.rejoinCred = answer.rejoin || null;
      if (rejoin) { this.stats.rejoins++; this.rejoined = true; }
      this.freshSequences();
      this.connect(answer.ws, { ticket: answer.ticket });
      return;
    }
    const e = (answer && answer.error) ||
      (r ? { code: "internal", message: `HTTP ${r.status}` } : { code: "unavailable", message: `no answer (${failure})` });
    this.hooks.onEvent(`${rejoin ? "rejoin" : "join"} refused: ${e.code}: ${e.message}`, "error");
    if (r && r.status >= 400 && r.status < 500 && r.status !== 429) {
      if (rejoin) {
        // The session is over (used up, expired, a guest forgotten, not ours): join
        // afresh, which brings a key's character back and makes a guest a new guest.
        this.rejoinCred = null;
        this.join();
        return;
      }
      this.end(`${e.code}: ${e.message}`);
      return;
    }
    this.setState(State.reconnecting, `${e.code}: ${e.message}`);
    const wait = r && r.status === 429 ? Number(r.headers.get("Retry-After")) * 1000 || 0 : 0;
    this.retry(() => this.join(), wait);
  }

  // end stops the session for good with the server's refusal (State.error), which the
  // page shows where the player can choose again.
  end(detail) {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    if (this.ws) { this.ws.onclose = null; this.ws.close(1000); this.ws = null; }
    this.setState(State.error, detail);
  }

  // freshSequences starts the command and input seqs of a new session (a join or a
  // transfer; a resume keeps counting): the map starts a taken-over character's
  // sequence afresh too, so they count from 1. The stride (the direction last walked
  // and how many inputs in a row walked it, which sets each step's length) starts anew.
  freshSequences() {
    this.cmdSeq = 0;
    this.inputSeq = 0;
    this.pending = [];
    this.sentSeq = 0;
    this.dropCommands("the connection changed");
    this.ackStride = [0, 0, 0];
    this.predStride = [0, 0, 0];
  }

  // retry runs fn after a growing delay, or after atLeast ms when the server asked for
  // longer.
  retry(fn, atLeast = 0) {
    const d = this.reconnectDelay * (0.8 + 0.4 * Math.random());
    this.reconnectDelay = Math.min(RECONNECT_MAX_MS, this.reconnectDelay * 2);
    this.later(fn, Math.max(d, atLeast));
  }

  // connect opens the map's WebSocket (through the edge) and says hello.
  connect(path, hello) {
    if (this.left) return; // a join answered after the player went to the menu
    if (this.state !== State.reconnecting && this.state !== State.transferring) this.setState(State.connecting);
    const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + path;
    const ws = new WebSocket(url);
    ws.binaryType = "arraybuffer";
    this.ws = ws;
    this.isMoving = false; // a move keeps its socket: a new one is no move
    let welcomed = false;
    let refused = null;
    let transfer = null;
    ws.onopen = () => this.send({ v: 1, kind: "hello", ...hello });
    ws.onmessage = (m) => {
      if (typeof m.data !== "string") {
        if (welcomed) this.snapshot(new Uint8Array(m.data));
        return;
      }
      this.count(m.data.length);
      let msg;
      try { msg = JSON.parse(m.data); } catch { return; }
      switch (msg.kind) {
        case "welcome": welcomed = true; this.welcomed(msg, path); break;
        case "error":
          if (!welcomed || msg.code === "replaced") refused = msg;
          else if (!this.answered(msg.seq, msg)) this.hooks.onEvent(`refused: ${msg.code}: ${msg.message}`, "error");
          break;
        case "transfer":
          transfer = msg;
          this.setState(State.transferring, `to ${msg.toInstanceId}`);
          break;
        case "event":
          if (msg.name === "moving") this.moving(msg);
          else if (msg.name === "view_capped") this.viewCap = msg.data && msg.data.shown < msg.data.inView ? msg.data : null;
          else if (GAME_EVENTS.has(msg.name)) this.gameEvent(msg);
          else this.hooks.onEvent(eventText(msg), msg.name === "transfer_denied" ? "error" : "info");
          break;
        case "pong": this.stats.rtt = performance.now() - Number(msg.t); break;
        case "ack": this.answered(msg.seq, null); break; // movement is acknowledged by snapshots
      }
    };
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (transfer) return this.follow(transfer);
      if (refused) return this.refused(refused, hello, ev.code);
      this.dropped(ev, welcomed);
    };
  }

  // moving takes the map's "moving" event: the map is being upgraded, and the edge moves
  // this very socket to its new process, whose welcome comes next on it (a live
  // upgrade). Nothing is shown as lost: the player stays "playing"; inputs wait (the
  // map the player leaves drops them), and the new process's session counts its
  // sequences afresh.
  moving(msg) {
    this.stats.moves++;
    this.isMoving = true;
    this.freshSequences();
    this.hooks.onEvent(`map ${this.welcome ? this.welcome.mapId : ""} upgraded (${(msg.data && msg.data.reason) || "moved"})`, "info");
  }

  // welcomed takes the map's welcome: a new world when the map changed, a fresh decoder
  // (a resumed connection starts with a full snapshot), and the next resume token. A
  // welcome on a socket that is already playing comes from the map's new process after
  // a "moving" event: the world is kept when its hash is unchanged, and built again when
  // not. Kept, what the page draws (the player where it was predicted, everyone else,
  // the inventory) stays until the new process's first snapshot replaces it, so that no
  // frame goes blank; only what names the old process's entities goes at once.
  welcomed(w, path) {
    const moved = this.isMoving;
    this.isMoving = false;
    const sameWorld = this.welcome && this.welcome.worldHash === w.worldHash && this.world;
    const keepView = moved && sameWorld;
    this.welcome = w;
    this.wsPath = path;
    this.resume = w.resumeToken ? { token: w.resumeToken, until: performance.now() + (w.resumeTtlMs || 0) } : null;
    this.reconnectDelay = RECONNECT_MIN_MS;
    this.stats.welcomedAt = performance.timeOrigin + performance.now();
    this.stats.movedAt = 0;
    this.firstSelf = null;
    if (this.decoder) this.wasm.dropDecoder(this.decoder);
    this.decoder = this.wasm.newDecoder();
    this.ackTick = 0;
    this.heardAt = performance.now(); // the welcome's snapshots come next
    this.staleView = keepView;
    if (!keepView) this.freshView();
    if (moved) this.itemIds.clear();
    if (!w.resumed && !keepView) {
      // A new session: its map sends the inventory (and the speed it walks with) next.
      this.inventory = null;
      this.server = null; this.predicted = null; this.previous = null;
      this.ackStride = [0, 0, 0]; this.predStride = [0, 0, 0];
    }
    if (!sameWorld) {
      const started = performance.now();
      if (this.world) this.wasm.dropWorld(this.world.id);
      const world = this.wasm.loadWorld(JSON.stringify(w.mapConfig));
      if (world.error) {
        this.world = null;
        this.worldError = `cannot generate map ${w.mapId}: ${world.error}`;
      } else {
        this.world = world;
        this.world.generateMs = performance.now() - started;
        this.itemIds.clear();
        this.seeded.clear();
        const seeded = this.wasm.seededItems(world.id);
        if (Array.isArray(seeded)) for (const it of seeded) this.seeded.set(`${it.template}:${it.x}:${it.y}`, it.itemId);
        this.worldError = world.hash === w.worldHash ? "" :
          `world hash mismatch on ${w.mapId}: generated ${world.hash.slice(0, 12)}…, server ${String(w.worldHash).slice(0, 12)}…`;
      }
      this.hooks.onWorld(this.world, w);
    }
    if (this.rejoined) {
      this.rejoined = false;
      this.hooks.onEvent(`back on ${w.mapId} as the same character`, "info");
    } else if (w.resumed) this.hooks.onEvent("resumed", "info");
    this.setState(State.playing, w.instanceId);
    if (w.resumed && this.pending.length) this.sendInputs(this.pending.slice(-MAX_BATCH)); // what the old socket may have lost
    this.pingLoop(this.ws);
  }

  // freshView forgets the snapshots and tracks of the entities of a map process, and
  // its clock.
  freshView() {
    this.snapshots = [];
    this.tracks = new Map();
    this.clockOffset = null;
  }

  pingLoop(ws) {
    if (this.ws !== ws || ws.readyState !== WebSocket.OPEN) return;
    if (this.pinging === ws && !this.pingDue) return; // a second welcome on one socket (a move) keeps its one loop
    this.pinging = ws;
    this.pingDue = false;
    this.send({ v: 1, kind: "ping", t: performance.now() });
    this.later(() => { this.pingDue = true; this.pingLoop(ws); }, PING_EVERY_MS);
  }

  // follow reconnects to the destination of a granted transfer with its token.
  follow(t) {
    this.stats.transfers++;
    this.hooks.onEvent(`portal: to ${t.toInstanceId}`, "info");
    this.freshSequences();
    this.resume = null;
    this.setState(State.transferring, `to ${t.toInstanceId}`);
    this.connect(t.ws, { ticket: t.token });
  }

  // refused handles a hello the map answered with an error and closed with closeCode.
  refused(e, hello, closeCode) {
    if (e.code === "replaced") {
      this.stop("this character is now played elsewhere (another tab or device)");
      return;
    }
    this.hooks.onEvent(`${hello.resume ? "resume" : "hello"} refused: ${e.code}`, "info");
    if (REJOIN.has(e.code)) {
      // The resume token died with the map process, or a ticket went stale: rejoin the
      // same character (the orchestrator's credential survives the map).
      this.resume = null;
      this.setState(State.reconnecting, "joining again");
      this.join();
      return;
    }
    // 1008 is the map's final word on what was presented: a resume token it refused
    // is never presented again. 1013 (try again later) keeps it for the next try.
    if (closeCode === 1008) this.resume = null;
    this.setState(State.reconnecting, `${e.code}: ${e.message}`);
    this.retry(() => this.reconnect());
  }

  // dropped handles a connection that closed without a transfer or a refusal. When the
  // edge says the map went away, no resume is tried (the token died with the map's
  // process, and trying it costs a round trip and a refusal): the page rejoins at once.
  dropped(ev, welcomed) {
    if (welcomed) {
      this.stats.reconnects++;
      this.stats.droppedAt = this.server; // the last position the server showed
    }
    this.setState(State.reconnecting, closed(ev));
    if (ev.code === MAP_GONE) {
      this.stats.mapsGone++;
      this.resume = null;
      this.join();
      return;
    }
    if (welcomed) this.reconnect(); else this.retry(() => this.reconnect());
  }

  // reconnect resumes inside the resume window, else rejoins (join).
  reconnect() {
    if (this.resume && performance.now() < this.resume.until) {
      this.stats.resumes++;
      this.connect(this.wsPath, { resume: this.resume.token });
      return;
    }
    this.resume = null;
    this.join();
  }

  send(msg) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      this.ws.send(JSON.stringify(msg));
      this.stats.messages++;
    }
  }

  count(n) {
    const now = performance.now();
    this.stats.bytes.push([now, n]);
    if (this.stats.bytes.length > 512) this.rates(now); // trims, even with no overlay open
  }

  // snapshot decodes one binary frame, reconciles the prediction and buffers the
  // entities for interpolation.
  snapshot(frame) {
    const now = performance.now();
    this.count(frame.length);
    const s = this.wasm.decode(this.decoder, frame);
    if (s.error) {
      if (s.error !== "no_baseline") this.hooks.onEvent(`snapshot: ${s.error}`, "error");
      return;
    }
    if (this.staleView) {
      this.staleView = false;
      this.freshView();
    }
    this.stats.snapshots.push(now);
    this.stats.received++;
    this.stats.lastTick = s.tick;
    this.ackTick = s.tick;
    this.unacked++;
    if (s.full || s.records > 0) this.ackChanged = true;
    const f = this.wasm.entityFields;
    const ents = new Map();
    let self = null;
    for (let i = 0; i + f.stride <= s.entities.length; i += f.stride) {
      const e = { slot: s.entities[i + f.slot], kind: s.entities[i + f.kind], id: s.entities[i + f.id],
        x: s.entities[i + f.x], y: s.entities[i + f.y], facing: s.entities[i + f.facing],
        state: s.entities[i + f.state], template: s.entities[i + f.template] };
      ents.set(e.id, e);
      if (e.slot === s.self) self = e;
    }
    const tickMs = 1000 / (this.welcome.tickHz || 30);
    const sample = now - s.tick * tickMs;
    this.clockOffset = this.clockOffset === null ? sample : this.clockOffset + (sample - this.clockOffset) * 0.05;
    this.snapshots.push({ tick: s.tick, time: s.tick * tickMs, entities: ents });
    if (this.snapshots.length > SNAPSHOT_BUFFER) this.snapshots.shift();
    if (self) {
      if (!this.stats.movedAt) {
        if (!this.firstSelf) this.firstSelf = { x: self.x, y: self.y };
        else if (self.x !== this.firstSelf.x || self.y !== this.firstSelf.y) this.stats.movedAt = performance.timeOrigin + now;
      }
      this.selfId = self.id;
      this.reconcile(self, s.seq);
    }
    this.track(ents, s.tick * tickMs);
    this.answerSnapshot();
  }

  // answerSnapshot sends the one message a snapshot gets: the inputs gathered since the
  // last batch, carrying its ack, or without any an ack when it changed the view (or
  // IDLE_ACK_QUIET went by without one), else nothing.
  answerSnapshot() {
    this.heardAt = performance.now();
    if (this.flushInputs()) return;
    if (this.ackChanged || this.unacked >= IDLE_ACK_QUIET) {
      this.send({ v: 1, kind: "ack", tick: this.ackTick });
      this.unacked = 0;
      this.ackChanged = false;
    }
  }

  // flushInputs sends the inputs gathered and not yet sent in one batch; false when
  // there are none (or the map is moving the player, when they are held back).
  flushInputs() {
    if (this.isMoving || !this.pending.length || this.pending[this.pending.length - 1].seq <= this.sentSeq) return false;
    const i = this.pending.findIndex((p) => p.seq > this.sentSeq);
    this.sendInputs(this.pending.slice(i));
    return true;
  }

  // snapshotMs is the interval between two snapshots of the map.
  snapshotMs() {
    return 1000 / ((this.welcome && this.welcome.snapshotHz) || 15);
  }

  // period, track and others are the interpolation of everyone else (interpolate.js).
  period(e) { return periodOf(this, e); }
  track(ents, time) { recordTrack(this, ents, time); }
  others(now, delayMs) { return othersAt(this, now, delayMs); }

  // reconcile drops the inputs the server applied and replays the rest from the
  // server's position with the server's movement code.
  reconcile(self, seq) {
    this.server = { x: self.x, y: self.y };
    if (!this.predicted) {
      // The first snapshot of a session: no input was sent yet (step waits for it). A
      // resumed session carries its input seq, which the server counts on from; new
      // inputs continue above it.
      this.inputSeq = Math.max(this.inputSeq, seq);
    }
    this.stats.acked = seq;
    const acked = [];
    while (this.pending.length && this.pending[0].seq <= seq) acked.push(this.pending.shift());
    // The stride at the acknowledged input: the server walked every input up to it (as
    // long as it dropped none), so it is the stride those inputs leave.
    if (acked.length) this.ackStride = this.replay({ x: 0, y: 0 }, this.ackStride, acked).stride;
    const before = this.predicted;
    const after = this.replay(this.server, this.ackStride, this.pending);
    if (before) {
      const dx = before.x - after.x, dy = before.y - after.y;
      const err = Math.hypot(dx, dy);
      this.stats.predictionError = err;
      this.stats.maxPredictionError = Math.max(this.stats.maxPredictionError, err);
      if (err > 0) this.stats.corrections.push({ seq, err, server: this.server, before, after,
        pending: this.pending.map((i) => [i.seq, i.dx, i.dy]) });
      if (this.stats.corrections.length > 8) this.stats.corrections.shift();
      // What was drawn moves to the corrected place over a few frames, not at once.
      this.correction.x += dx;
      this.correction.y += dy;
      if (err > 64) this.correction = { x: 0, y: 0 }; // teleported (a transfer, a respawn)
    }
    this.predicted = { x: after.x, y: after.y };
    this.predStride = after.stride;
    if (!before) this.previous = this.predicted;
  }

  // replay runs inputs from position from with stride (the server's sim.Replay, in
  // WASM) and returns the position and the stride they leave.
  replay(from, stride, inputs) {
    const flat = [];
    for (const i of inputs) flat.push(i.seq, i.dx, i.dy);
    const p = this.wasm.replay(this.world.id, from.x, from.y, stride[0], stride[1], stride[2], flat,
      this.speed(), this.welcome.tickHz || 30);
    return Array.isArray(p) ? { x: p[0], y: p[1], stride: [p[2], p[3], p[4]] } : { x: from.x, y: from.y, stride };
  }

  // speed is the player's speed in quanta per second, as the server walks it now: the
  // inventory event's speed (units/s, always a whole number of quanta), which
  // encumbrance lowers; the module's default before the first one.
  speed() {
    const v = this.inventory && this.inventory.speed;
    return v > 0 ? Math.round(v * this.wasm.quantaPerUnit) : this.wasm.playerSpeed;
  }

  // step runs one input tick: direction (dx, dy) from the keys, predicted at once and
  // gathered for the batch the next snapshot answers (answerSnapshot); when no snapshot
  // came for a snapshot interval, the gathered inputs leave now.
  step(dx, dy) {
    if (this.state !== State.playing || !this.world || !this.predicted || this.isMoving) return;
    this.previous = this.predicted;
    const now = performance.now();
    this.lastStepAt = now;
    if ((dx !== 0 || dy !== 0) && this.pending.length < MAX_PENDING) { // past MAX_PENDING the server would drop it: wait for acks
      const input = { seq: ++this.inputSeq, dx, dy };
      this.pending.push(input);
      const next = this.replay(this.predicted, this.predStride, [input]);
      this.predicted = { x: next.x, y: next.y };
      this.predStride = next.stride;
    }
    if (now - this.heardAt >= BATCH_IDLE_MS) this.flushInputs();
  }

  // command sends one command other than movement (items, equipment, ...) and returns
  // its seq (0 when not playing); the map answers an ack or an error naming that seq
  // (equipment: an equip_result event), which onAnswer reports.
  command(feature, action, payload) {
    if (this.state !== State.playing || !this.ws || this.isMoving) return 0;
    this.flushInputs(); // the inputs made before it go first, as they were made
    const msg = { v: 1, kind: "command", seq: ++this.cmdSeq, feature, action, payload };
    if (this.ackTick) { msg.tick = this.ackTick; this.unacked = 0; this.ackChanged = false; }
    this.send(msg);
    this.commands.set(msg.seq, { seq: msg.seq, feature, action, payload });
    if (this.commands.size > MAX_COMMANDS) this.commands.delete(this.commands.keys().next().value);
    return msg.seq;
  }

  // answered settles the command seq with an ack (err null) or an error; false when no
  // such command waits.
  answered(seq, err) {
    const cmd = this.commands.get(seq);
    if (!cmd) return false;
    this.commands.delete(seq);
    if (this.hooks.onAnswer) this.hooks.onAnswer(cmd, err);
    return true;
  }

  // dropCommands settles every waiting command as lost: its connection is gone, and a
  // new session's seqs start again.
  dropCommands(why) {
    const waiting = [...this.commands.values()];
    this.commands.clear();
    for (const cmd of waiting) if (this.hooks.onAnswer) this.hooks.onAnswer(cmd, { code: "lost", message: why });
  }

  // gameEvent keeps what the page needs of an event of the game and hands it on.
  gameEvent(msg) {
    const d = msg.data || {};
    if (msg.name === "inventory") this.inventory = d;
    if (d.itemId && d.id !== undefined) this.itemIds.set(d.id, d.itemId);
    if (msg.name === "equip_result" && d.seq !== undefined) {
      const cmd = this.commands.get(d.seq);
      if (cmd) {
        this.commands.delete(d.seq);
        if (this.hooks.onAnswer) this.hooks.onAnswer(cmd, d.success ? null : { code: d.code, message: d.message });
      }
    }
    if (this.hooks.onGame) this.hooks.onGame(msg);
  }

  // itemIdOf is the item id of an item entity of the snapshots: learned from an item
  // event, else the one the map's generator placed there; "" when unknown.
  itemIdOf(e) {
    return this.itemIds.get(e.id) || this.seeded.get(`${e.template}:${e.x}:${e.y}`) || "";
  }

  sendInputs(inputs) {
    const msg = { v: 1, kind: "command", seq: ++this.cmdSeq, feature: "movement", action: "input_batch",
      payload: { inputs } };
    if (this.ackTick) { msg.tick = this.ackTick; this.unacked = 0; this.ackChanged = false; }
    this.send(msg);
    this.sentSeq = inputs[inputs.length - 1].seq;
    this.stats.sent = this.sentSeq;
    this.stats.batches++;
    this.heardAt = performance.now();
  }

  // selfPosition is where to draw the player (quanta): between the last two predicted
  // steps, plus what is left of the last correction.
  selfPosition(now) {
    if (!this.predicted) return null;
    const tickMs = 1000 / ((this.welcome && this.welcome.tickHz) || 30);
    const a = Math.min(1, (now - this.lastStepAt) / tickMs);
    const p = this.previous || this.predicted;
    this.correction.x *= 0.8;
    this.correction.y *= 0.8;
    return { x: p.x + (this.predicted.x - p.x) * a + this.correction.x,
      y: p.y + (this.predicted.y - p.y) * a + this.correction.y };
  }

  // rates returns snapshots per second and kbit/s over the last second.
  rates(now) {
    const cut = now - 1000;
    while (this.stats.snapshots.length && this.stats.snapshots[0] < cut) this.stats.snapshots.shift();
    while (this.stats.bytes.length && this.stats.bytes[0][0] < cut) this.stats.bytes.shift();
    let bytes = 0;
    for (const [, n] of this.stats.bytes) bytes += n;
    return { snapshotHz: this.stats.snapshots.length, kbps: bytes * 8 / 1000 };
  }

  // latest returns the entities of the newest snapshot (not interpolated).
  latest() {
    const s = this.snapshots[this.snapshots.length - 1];
    return s ? s.entities : new Map();
  }

  // leave ends the session for good, as the player goes back to the menu, and frees
  // what it holds in the module.
  leave() {
    this.left = true;
    this.stop("left for the menu");
    if (this.world) this.wasm.dropWorld(this.world.id);
    if (this.decoder) this.wasm.dropDecoder(this.decoder);
    this.world = null;
    this.decoder = 0;
  }

  // selfName is the player's own character's name, as the welcome says it.
  selfName() {
    return (this.welcome && (this.welcome.name || this.welcome.characterId)) || "";
  }

  entitiesInView() {
    const s = this.snapshots[this.snapshots.length - 1];
    return s ? s.entities.size : 0;
  }
}

// eventText is what the event log says of an event the page has no panel for: its
// message, written for players by the game of the map (tag's "tagged"), when it has
// one and no code.
function eventText(e) {
  if (e.name === "transfer_denied") return `portal closed: ${e.code}${e.message ? " (" + e.message + ")" : ""}`;
  if (e.message && !e.code) return e.message;
  return `${e.name}${e.code ? ": " + e.code : ""}${e.message ? " " + e.message : ""}`;
}
