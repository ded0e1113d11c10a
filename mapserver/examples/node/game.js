'use strict';
// The game: players walking on the generated world. One Game owns every player; the
// tick (a timer) walks at most one queued input per player, sends snapshots and pushes
// state. The player side is docs/netcode.md ("What every map must do"), the
// orchestrator side docs/map-contract.md.

const crypto = require('node:crypto');
const { encodeFull, KIND, FORMAT } = require('./snapshot');
const { persistBody } = require('./orch');
const { PLAYER_SPEED, QUANTA_PER_UNIT } = require('./world');

const HELLO_MS = 5000, WORLD_WAIT_MS = 5000, IDLE_MS = 30000, KEEPALIVE_MS = 15000;
const JITTER = 16; // inputs that may wait; past it the oldest are dropped
const MAX_INPUTS = 32, MAX_NAMES = 64;
const VIEW = 128; // players a snapshot shows at most: the nearest
const SIM_CORE = 'mapyard-node-example/1';

class Game {
  constructor({ orch, log, tickHz, snapshotHz, pushMs }) {
    Object.assign(this, { orch, log, tickHz, snapshotHz, pushMs });
    this.instanceId = '';
    this.mapId = '';
    this.world = null; // {config, hash, geo}
    this.players = new Map(); // characterId -> player
    this.slots = []; // slot -> player
    this.conns = new Set();
    this.tick = 0;
    this.nextEntity = 1; // entity ids are never reused on this map
    this.stopping = false;
  }

  // start sets the instance and its world; the tick starts with it.
  start(instanceId, mapId, config, geo, hash) {
    Object.assign(this, { instanceId, mapId, world: { config, geo, hash } });
    const period = 1000 / this.tickHz;
    let due = performance.now();
    this.nextPush = Date.now() + this.pushMs;
    this.timer = setInterval(() => { // an accumulator: late wake-ups catch up, at most 4 steps
      for (let n = 0; performance.now() >= due && n < 4; n++) { due += period; this.step(); }
      if (performance.now() > due) due = performance.now();
    }, period / 2);
    this.keepalive = setInterval(() => this.sweep(), 1000);
  }

  send(c, msg) { c.conn.sendText(JSON.stringify(msg)); }

  error(c, code, message, seq) {
    this.send(c, seq ? { v: 1, kind: 'error', code, message, seq } : { v: 1, kind: 'error', code, message });
  }

  // refuse answers a hello with an error and closes: 1013 (try again) for
  // map_unavailable, 1008 otherwise.
  refuse(c, code, message) {
    c.state = 'closed';
    this.error(c, code, message);
    c.conn.close(code === 'map_unavailable' ? 1013 : 1008, code);
  }

  connect(conn) {
    const c = { conn, state: 'hello', player: null, last: Date.now(), pinged: Date.now() };
    this.conns.add(c);
    const timer = setTimeout(() => c.state === 'hello' && this.refuse(c, 'bad_request', 'no hello within 5 s'), HELLO_MS);
    conn.on('message', (data, text) => {
      c.last = Date.now();
      if (c.state === 'hello') this.hello(c, data, text).catch((err) => this.log('error', 'hello failed', { err: String(err) }));
      else if (c.state === 'playing') this.message(c, data, text);
    });
    conn.on('close', () => {
      clearTimeout(timer);
      c.state = 'closed';
      this.conns.delete(c);
      const p = c.player;
      if (p && p.conn === c && this.players.get(p.id) === p) this.release(p, Date.now() + 10000);
    });
  }

  // sweep closes idle connections and pings the others, so middleboxes keep them.
  sweep() {
    const now = Date.now();
    for (const c of this.conns) {
      if (now - c.last > IDLE_MS) c.conn.close(1000, 'idle timeout');
      else if (now - c.pinged > KEEPALIVE_MS) { c.pinged = now; c.conn.ping(); }
    }
  }

  async hello(c, data, text) {
    c.state = 'redeeming';
    let m = null;
    try { m = text ? JSON.parse(data) : null; } catch { /* refused below */ }
    if (!m || m.v !== 1 || (m.kind !== 'hello' && m.kind !== 'resume')) return this.refuse(c, 'bad_request', 'the first message must be a hello');
    if (m.formats !== undefined && (!Array.isArray(m.formats) || m.formats.some((f) => typeof f !== 'number'))) {
      return this.refuse(c, 'bad_request', 'formats must be an array of numbers');
    }
    if (m.formats && !m.formats.includes(FORMAT)) return this.refuse(c, 'unsupported_format', `this map sends snapshot format ${FORMAT}`);
    if (m.ticket === undefined && typeof m.resume === 'string') return this.refuse(c, 'ticket_invalid', 'this map does not resume: join again');
    if (typeof m.ticket !== 'string' || m.ticket === '') return this.refuse(c, 'bad_request', 'a hello carries a ticket');
    for (const until = Date.now() + WORLD_WAIT_MS; !this.world && Date.now() < until;) await new Promise((r) => setTimeout(r, 50));
    if (!this.world || this.stopping) return this.refuse(c, 'map_unavailable', 'the map is not ready; join again');
    let r;
    try {
      r = await this.orch.call('/orch/redeem', { instanceId: this.instanceId, token: m.ticket }); // never repeated
    } catch {
      return this.refuse(c, 'map_unavailable', 'the map cannot reach the orchestrator; join again');
    }
    if (r.status >= 500) return this.refuse(c, 'map_unavailable', 'the orchestrator could not redeem the ticket; join again');
    if (r.status !== 200 || !r.body) {
      const e = (r.body && r.body.error) || {};
      return this.refuse(c, e.code || 'ticket_invalid', e.message || `redeem answered ${r.status}`);
    }
    if (c.state === 'closed' || this.stopping) {
      if (r.body.kind === 'transfer') this.reportTransfer(r.body.transferId, 'the player left or the map stopped before it was admitted');
      if (c.state !== 'closed') this.refuse(c, 'map_unavailable', 'the map is stopping; join again');
      return;
    }
    this.admit(c, r.body);
  }

  admit(c, r) {
    let p = this.players.get(r.characterId);
    if (p) { // a takeover: the new connection is a new session of the same character
      if (p.conn && p.conn !== c) {
        const old = p.conn;
        old.player = null;
        old.state = 'closed';
        this.error(old, 'replaced', 'another connection took this character over');
        old.conn.close(4000, 'replaced');
      }
      Object.assign(p, { epoch: r.epoch, queue: [], lastSeq: 0, lastQueued: 0, cmdSeq: 0, stride: { dx: 0, dy: 0, run: 0 } });
    } else {
      const at = this.arrival(r);
      p = {
        id: r.characterId, name: r.name, epoch: r.epoch, attributes: (r.state && r.state.attributes) || {},
        revision: (r.state && r.state.revision) || 0, x: at.x, y: at.y, stride: { dx: 0, dy: 0, run: 0 }, facing: 0,
        queue: [], lastSeq: 0, lastQueued: 0, cmdSeq: 0, entity: this.nextEntity++, slot: this.freeSlot(), frozen: false,
      };
      p.inPortal = this.portalAt(p.x, p.y) !== undefined; // arriving in a portal does not trigger it
      this.players.set(p.id, p);
      this.slots[p.slot] = p;
    }
    p.conn = c;
    c.player = p;
    c.state = 'playing';
    const w = this.world;
    const welcome = {
      v: 1, kind: 'welcome', characterId: p.id, instanceId: this.instanceId, mapId: this.mapId, epoch: p.epoch,
      worldHash: w.hash, tickHz: this.tickHz, snapshotHz: this.snapshotHz, mapConfig: w.config, snapshotFormat: FORMAT,
    };
    if (p.name) welcome.name = p.name;
    if (r.kind === 'transfer') welcome.transferId = r.transferId;
    this.send(c, welcome);
    if (r.kind === 'transfer') this.reportTransfer(r.transferId, null);
    this.log('info', 'player admitted', { character: p.id, kind: r.kind, x: p.x / QUANTA_PER_UNIT, y: p.y / QUANTA_PER_UNIT });
  }

  freeSlot() {
    let s = 0;
    while (this.slots[s]) s++;
    return s;
  }

  // arrival is where a redeemed character appears, in quanta: where it was saved when
  // that was on this map; beside this map's portal back to the map it came from; else a
  // spawn point picked by its id. Moved to open ground when a body may not stand there.
  arrival(r) {
    const geo = this.world.geo, st = r.state;
    let x = Math.floor(geo.width / 2), y = Math.floor(geo.height / 2);
    const back = st && geo.portals.find((p) => p.target === st.mapId);
    if (st && st.mapId === this.mapId) {
      x = Math.round(st.x * QUANTA_PER_UNIT);
      y = Math.round(st.y * QUANTA_PER_UNIT);
    } else if (back) { // 1.5 units outside its trigger, towards the map's centre
      const d = Math.hypot(x - back.x, y - back.y) || 1, out = back.r + 1.5 * QUANTA_PER_UNIT;
      x = Math.round(back.x + ((x - back.x) / d) * out);
      y = Math.round(back.y + ((y - back.y) / d) * out);
    } else if (geo.spawns.length) {
      const s = geo.spawns[crypto.createHash('sha256').update(r.characterId).digest().readUInt32BE(0) % geo.spawns.length];
      ({ x, y } = s);
    }
    return geo.nearestOpen(x, y);
  }

  portalAt(x, y) {
    return this.world.geo.portals.find((p) => (x - p.x) ** 2 + (y - p.y) ** 2 < p.r * p.r);
  }

  message(c, data, text) {
    if (!text) return this.error(c, 'bad_request', 'messages are JSON text frames');
    let m;
    try { m = JSON.parse(data); } catch { return this.error(c, 'bad_request', 'malformed JSON'); }
    if (!m || typeof m !== 'object' || m.v !== 1) return this.error(c, 'bad_request', 'not a version 1 envelope');
    switch (m.kind) {
      case 'ping':
        if (typeof m.t !== 'number') return this.error(c, 'bad_request', 'a ping carries a number t');
        return this.send(c, { v: 1, kind: 'pong', t: m.t });
      case 'ack': return undefined; // every snapshot is full: acks change nothing
      case 'hello': case 'resume': return this.error(c, 'bad_request', 'already welcomed');
      case 'command': return this.command(c, m);
      default: return this.error(c, 'bad_request', `unknown kind ${JSON.stringify(m.kind)}`);
    }
  }

  command(c, m) {
    const p = c.player;
    if (!Number.isSafeInteger(m.seq) || m.seq < 1) return this.error(c, 'bad_request', 'a command carries a seq ≥ 1');
    if (m.seq <= p.cmdSeq || p.frozen) return undefined; // a duplicate, or the character is in transit
    let code = null;
    if (m.feature === 'movement' && m.action === 'input_batch') code = this.inputs(p, m.payload);
    else if (m.feature === 'players' && m.action === 'names') code = this.names(c, m.seq, m.payload);
    else code = 'unknown_command';
    if (code) return this.error(c, code, `command ${m.feature}/${m.action} refused: ${code}`, m.seq);
    p.cmdSeq = m.seq;
    return undefined;
  }

  // inputs queues a movement input batch ({"inputs":[{seq,dx,dy},...]}) and returns
  // the refusal code of one that does not have the documented shape, or null.
  inputs(p, payload) {
    const list = payload && payload.inputs;
    if (!payload || typeof payload !== 'object' || Object.keys(payload).length !== 1 || !Array.isArray(list) || list.length === 0) return 'bad_payload';
    if (list.length > MAX_INPUTS) return 'too_many_inputs';
    let prev = 0;
    for (const i of list) {
      if (!i || typeof i !== 'object' || Object.keys(i).length !== 3 || ![i.seq, i.dx, i.dy].every(Number.isInteger)) return 'bad_payload';
      if (i.seq < 1 || i.seq <= prev || i.seq > Number.MAX_SAFE_INTEGER) return 'bad_seq';
      if (Math.abs(i.dx) > 127 || Math.abs(i.dy) > 127) return 'bad_direction';
      prev = i.seq;
    }
    for (const i of list) {
      if (i.seq > p.lastQueued) { p.queue.push(i); p.lastQueued = i.seq; }
    }
    while (p.queue.length > JITTER) p.lastSeq = p.queue.shift().seq; // dropped, counted as handled
    return null;
  }

  // names answers which of the entity ids asked are characters here, and their names.
  names(c, seq, payload) {
    const ids = payload && payload.ids;
    if (!Array.isArray(ids) || ids.length === 0 || ids.length > MAX_NAMES || Object.keys(payload).length !== 1 || !ids.every(Number.isInteger)) return 'bad_payload';
    const byEntity = new Map([...this.players.values()].map((p) => [p.entity, p]));
    const names = ids.filter((id) => byEntity.has(id) && byEntity.get(id).name)
      .map((id) => ({ id, characterId: byEntity.get(id).id, name: byEntity.get(id).name }));
    this.send(c, { v: 1, kind: 'event', name: 'names', data: { seq, names } });
    return null;
  }

  step() {
    this.tick++;
    const geo = this.world.geo;
    for (const p of this.players.values()) {
      const i = p.queue.shift();
      if (!i) continue; // nothing waiting: the player stands still
      p.lastSeq = i.seq;
      if (p.frozen) continue; // in transit: inputs are consumed without walking
      const [at, stride] = geo.walk(p, p.stride, i.dx, i.dy, PLAYER_SPEED, this.tickHz);
      Object.assign(p, { x: at.x, y: at.y, stride });
      if (i.dx || i.dy) p.facing = Math.round((Math.atan2(i.dy, i.dx) / (2 * Math.PI)) * 256) & 255;
      const portal = this.portalAt(p.x, p.y);
      if (!portal) p.inPortal = false;
      else if (!p.inPortal) { p.inPortal = true; this.transfer(p, portal); }
    }
    if (Math.floor((this.tick * this.snapshotHz) / this.tickHz) !== Math.floor(((this.tick - 1) * this.snapshotHz) / this.tickHz)) this.snapshots();
    if (Date.now() >= this.nextPush) {
      this.nextPush = Date.now() + this.pushMs;
      for (const p of this.players.values()) if (!p.pushing && !p.frozen) this.push(p, this.nextPush);
    }
  }

  // snapshots sends every playing client a full snapshot of the players nearest to it.
  snapshots() {
    const all = [...this.players.values()].sort((a, b) => a.slot - b.slot);
    for (const p of all) {
      if (!p.conn || p.conn.state !== 'playing') continue;
      let seen = all;
      if (all.length > VIEW) {
        const d = (o) => (o.x - p.x) ** 2 + (o.y - p.y) ** 2;
        seen = [...all].sort((a, b) => d(a) - d(b) || a.slot - b.slot).slice(0, VIEW).sort((a, b) => a.slot - b.slot);
      }
      const ents = seen.map((o) => ({ slot: o.slot, kind: KIND.player, id: o.entity, x: o.x, y: o.y, facing: o.facing }));
      p.conn.conn.sendBinary(encodeFull(this.tick, p.lastSeq, p.slot, ents));
    }
  }

  // nextRevision is above every revision the character had: the redeem's and every one
  // this map sent (wall-clock microseconds, docs/map-contract.md "Revisions").
  nextRevision(p) {
    p.revision = Math.max(Date.now() * 1000, p.revision + 1);
    return p.revision;
  }

  characterState(p) {
    return { mapId: this.mapId, instanceId: this.instanceId, x: p.x / QUANTA_PER_UNIT, y: p.y / QUANTA_PER_UNIT, attributes: p.attributes };
  }

  // push sends the character's state, retrying until deadline. A refusal of its lease
  // (403, 409: the character joined elsewhere) drops the character.
  async push(p, deadline) {
    p.pushing = true;
    const body = persistBody({
      instanceId: this.instanceId, partition: `character:${p.id}`, revision: this.nextRevision(p), epoch: p.epoch,
      simCoreVersion: SIM_CORE, mapTick: this.tick, payload: this.characterState(p),
    });
    const r = await this.orch.retry('/orch/persist-snapshot', body, deadline);
    p.pushing = false;
    if (!r) this.log('warn', 'push not answered', { character: p.id });
    else if (r.status === 403 || r.status === 409) this.drop(p, 'the character is held elsewhere now');
    else if (r.status !== 200) this.log('warn', 'push refused', { character: p.id, status: r.status, error: r.body && r.body.error });
  }

  remove(p) {
    if (this.players.get(p.id) === p) this.players.delete(p.id);
    if (this.slots[p.slot] === p) this.slots[p.slot] = undefined;
  }

  // release takes a character out of the world and pushes its final state.
  release(p, deadline) {
    this.remove(p);
    return this.push(p, deadline);
  }

  drop(p, why) {
    if (this.players.get(p.id) !== p) return;
    this.remove(p);
    this.log('warn', 'character dropped', { character: p.id, why });
    if (p.conn && p.conn.state === 'playing') {
      p.conn.state = 'closed';
      this.error(p.conn, 'replaced', why);
      p.conn.conn.close(4000, 'replaced');
    }
  }

  // transfer asks the orchestrator to move p through portal; the character is frozen
  // until answered. Granted: the client gets the token and the connection closes 1000.
  async transfer(p, portal) {
    p.frozen = true;
    const transferId = 'tr-' + crypto.randomBytes(8).toString('hex');
    const state = { characterId: p.id, ...this.characterState(p), revision: this.nextRevision(p) };
    const req = { transferId, characterId: p.id, fromInstanceId: this.instanceId, toMapId: portal.target, epoch: p.epoch, state };
    const r = await this.orch.retry('/orch/request-transfer', req, Date.now() + 15000);
    if (this.players.get(p.id) !== p) return;
    const c = p.conn;
    if (r && r.status === 200) {
      this.remove(p); // its state went with the request
      this.log('info', 'player transferred', { character: p.id, to: r.body.toInstanceId });
      if (c && c.state === 'playing') {
        c.state = 'closed';
        const { token, ws, toInstanceId, expiresAtMs } = r.body;
        this.send(c, { v: 1, kind: 'transfer', transferId, token, ws, toInstanceId, expiresAtMs });
        c.conn.close(1000, 'transfer');
      }
      return;
    }
    p.frozen = false;
    const e = (r && r.body && r.body.error) || { code: 'map_unavailable', message: 'the orchestrator did not answer' };
    if (c && c.state === 'playing') this.send(c, { v: 1, kind: 'event', name: 'transfer_denied', code: e.code, message: e.message });
  }

  // reportTransfer tells the orchestrator whether a player with a transfer token was
  // admitted (reason null) or not.
  reportTransfer(transferId, reason) {
    const body = { transferId, instanceId: this.instanceId, success: reason === null };
    if (reason !== null) body.reason = reason;
    this.orch.retry('/orch/transfer-result', body, Date.now() + 30000)
      .then((r) => r && r.status !== 200 && this.log('warn', 'transfer result refused', { transferId, status: r.status }));
  }

  // stop closes every connection with 1001 and pushes every character, waiting for the
  // answers until deadline.
  async stop(deadline) {
    this.stopping = true;
    clearInterval(this.timer);
    clearInterval(this.keepalive);
    for (const c of this.conns) {
      if (c.state === 'playing' || c.state === 'hello') { c.state = 'closed'; c.conn.close(1001, 'map stopping'); }
    }
    await Promise.all([...this.players.values()].map((p) => this.release(p, deadline)));
    // Let the close frames go out before the process exits: a socket closed by the
    // exit with input still unread is reset, and a reset can lose the close frame.
    while ([...this.conns].some((c) => !c.conn.ended) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

module.exports = { Game };
