'use strict';
// A mapyard map in Node.js, written from docs/map-contract.md and docs/netcode.md: it
// serves the control listener (health, start-instance) and the game listener (the
// player WebSocket; the edge's link declined), registers and heartbeats, redeems
// tickets, walks players on the world mapyard's generator builds, sends binary
// snapshots, pushes character state, and on SIGTERM closes, pushes and exits 0.
// Run: node main.js, with the MAP_* environment the orchestrator sets.

const http = require('node:http');
const path = require('node:path');
const crypto = require('node:crypto');
const ws = require('./ws');
const { Orch } = require('./orch');
const { Game } = require('./game');
const { World } = require('./world');
const { Generator } = require('./generator');

const env = process.env;
const VERSION = env.NODE_MAP_VERSION || 'dev';
const ID = /^(?=.{1,48}$)[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;
const STOP_BUDGET_MS = 8000; // under the orchestrator's 10 s grace

function log(level, msg, fields = {}) {
  process.stdout.write(JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields }) + '\n');
}

function num(name, def) {
  const v = env[name];
  if (v === undefined || v === '') return def;
  if (!/^\d+$/.test(v) || Number(v) === 0) throw new Error(`${name}=${v}: want a whole number above 0`);
  return Number(v);
}

function required(name) {
  if (!env[name]) throw new Error(`${name} is not set`);
  return env[name];
}

const errorBody = (code, message) => JSON.stringify({ error: { code, message } });

function reply(res, status, body) {
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

// rawReply answers an upgrade request on its socket with a complete HTTP response.
function rawReply(socket, status, body) {
  socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

function readBody(req, limit) {
  return new Promise((resolve, reject) => {
    const parts = [];
    let n = 0;
    req.on('data', (d) => { n += d.length; if (n > limit) { reject(new Error('too_large')); req.destroy(); } else parts.push(d); });
    req.on('end', () => resolve(Buffer.concat(parts).toString()));
    req.on('error', reject);
  });
}

async function main() {
  const pool = env.MAP_POOL_ID || '';
  if (!pool && !env.MAP_INSTANCE_ID) throw new Error('MAP_INSTANCE_ID (or MAP_POOL_ID) must be set');
  const cfg = {
    orchURL: required('MAP_ORCH_URL'), credential: required('MAP_CREDENTIAL'), orchCredential: required('MAP_ORCH_CREDENTIAL'),
    gamePort: num('MAP_GAME_PORT', 7000), controlPort: num('MAP_CONTROL_PORT_BASE', 9100), host: env.MAP_LISTEN_HOST || '0.0.0.0',
    heartbeatMs: num('MAP_HEARTBEAT_MS', 5000), pushMs: num('MAP_SNAPSHOT_PUSH_MS', 10000),
    tickHz: num('MAP_TICK_HZ', 30), snapshotHz: num('MAP_SNAPSHOT_HZ', 15),
    origins: (env.MAP_ALLOWED_ORIGINS || '').split(',').map((s) => s.trim().replace(/\/$/, '')).filter(Boolean),
  };
  const generator = new Generator(path.resolve(env.NODE_MAP_WASM_DIR || __dirname)); // mapyard.wasm(.gz) and wasm_exec.js
  let claimed = false; // an instance was accepted (its world may still be generating)
  const orch = new Orch(cfg.orchURL, cfg.credential, log);
  const game = new Game({ orch, log, tickHz: cfg.tickHz, snapshotHz: cfg.snapshotHz, pushMs: cfg.pushMs });
  game.instanceId = pool || env.MAP_INSTANCE_ID;
  game.mapId = pool ? '' : env.MAP_MAP_ID || 'default'; // as mapyard's map, for bin/fakeorch

  const health = () => {
    const h = { status: 'ok', instanceId: game.instanceId, mapId: game.mapId, version: VERSION };
    if (game.world) h.worldHash = game.world.hash;
    return JSON.stringify(h);
  };

  // Registration: until answered (a map is not ready before); a 4xx is final.
  let registering = null;
  const register = () => registering || (registering = (async () => {
    const body = { instanceId: game.instanceId, mapId: game.mapId, gamePort: cfg.gamePort, controlPort: cfg.controlPort, version: VERSION };
    const r = await orch.retry('/orch/map-ready', body);
    if (r.status !== 200 || !r.body || r.body.registered !== true) {
      log('error', 'registration refused', { status: r.status, error: r.body && r.body.error });
      process.exit(1);
    }
    log('info', 'registered', { instance: game.instanceId, map: game.mapId });
    registering = null;
  })());

  // The control listener: every request carries the orchestrator's credential, compared
  // in constant time (digests of equal length, whatever was sent).
  const want = crypto.createHash('sha256').update(cfg.orchCredential).digest();
  const control = http.createServer(async (req, res) => {
    const got = crypto.createHash('sha256').update(String(req.headers['x-mapyard-secret'] || '')).digest();
    if (!crypto.timingSafeEqual(got, want)) return reply(res, 401, errorBody('unauthorized', 'missing or wrong X-Mapyard-Secret header'));
    const route = `${req.method} ${req.url.split('?')[0]}`;
    if (route === 'GET /health') return reply(res, 200, health());
    if (route !== 'POST /control/start-instance') return reply(res, 404, errorBody('not_found', `no route ${route}`));
    let m;
    try {
      m = JSON.parse(await readBody(req, 1 << 20));
    } catch (err) {
      return err.message === 'too_large' ? reply(res, 413, errorBody('too_large', 'body over 1 MiB')) : reply(res, 400, errorBody('bad_request', 'the body is not JSON'));
    }
    const bad = (msg) => reply(res, 400, errorBody('bad_request', msg));
    if (!m || typeof m !== 'object' || Array.isArray(m)) return bad('the body is not a JSON object');
    const unknown = Object.keys(m).filter((k) => !['instanceId', 'mapId', 'config'].includes(k));
    if (unknown.length) return bad(`unknown field ${unknown[0]}`);
    if (!ID.test(m.instanceId) || !ID.test(m.mapId)) return bad('instanceId and mapId must be ids');
    if (!m.config || typeof m.config !== 'object' || m.config.instanceId !== m.instanceId || m.config.mapId !== m.mapId) {
      return bad('config must be the whole MapConfig of the instance');
    }
    // The same instance again is answered 200, another 409.
    const taken = () => claimed || (!pool && m.instanceId !== env.MAP_INSTANCE_ID);
    const again = () => (m.instanceId === game.instanceId ? reply(res, 200, health())
      : reply(res, 409, errorBody('conflict', `this map runs ${game.instanceId}`)));
    if (taken()) return again();
    // A config the generator refuses fails at once (validation comes first); a valid one
    // is answered after a second at most and its world finished after the answer.
    const pending = generator.generate(JSON.stringify(m.config));
    const early = await Promise.race([pending, new Promise((resolve) => setTimeout(resolve, 1000, null))]);
    if (early && early.error) return bad(`config: ${early.error}`);
    if (taken()) return again(); // another request took the map meanwhile
    claimed = true;
    Object.assign(game, { instanceId: m.instanceId, mapId: m.mapId });
    reply(res, 200, health());
    if (pool) register(); // a pool map is that instance in everything it sends from now on
    const out = early || await pending;
    if (out.error) { // cannot happen for a config that validated; a map without a world is no map
      log('error', 'world generation failed', { err: out.error });
      process.exit(1);
    }
    game.start(m.instanceId, m.mapId, m.config, new World(JSON.parse(out.world)), out.hash);
    log('info', 'instance started', { instance: m.instanceId, worldHash: out.hash });
    return undefined;
  });

  // Idle connections are the orchestrator's to close (after 30 s), never ours first: a
  // probe sent on a connection the map is closing would fail.
  control.keepAliveTimeout = 65000;
  control.headersTimeout = 66000;

  // The game listener: the player WebSocket at /ws; the edge's optional link is declined
  // with a complete 404, so the edge forwards each player on a connection of its own.
  const originOK = (req) => {
    const o = req.headers.origin;
    if (!o) return true;
    try { if (new URL(o).host === req.headers.host) return true; } catch { return false; }
    return cfg.origins.includes(o.replace(/\/$/, ''));
  };
  const gameServer = http.createServer((req, res) => reply(res, 404, errorBody('not_found', 'players connect with a WebSocket at /ws')));
  gameServer.on('upgrade', (req, socket, head) => {
    socket.on('error', () => {});
    const route = req.url.split('?')[0];
    if (route !== '/ws') return rawReply(socket, 404, errorBody('not_found', route === '/link' ? 'this map serves no link' : `no route ${route}`));
    if (!originOK(req)) return rawReply(socket, 403, errorBody('forbidden', 'origin not allowed'));
    if (game.stopping) return rawReply(socket, 503, errorBody('map_unavailable', 'the map is stopping'));
    const conn = ws.accept(req, socket, head);
    if (conn) game.connect(conn);
    return undefined;
  });

  await generator.ready;
  await Promise.all([[control, cfg.controlPort], [gameServer, cfg.gamePort]].map(([s, port]) =>
    new Promise((resolve, reject) => { s.once('error', reject); s.listen(port, cfg.host, resolve); })));
  log('info', 'listening', { game: cfg.gamePort, control: cfg.controlPort, version: VERSION, instance: game.instanceId });
  await register();

  const beat = setInterval(async () => {
    if (registering) return;
    try {
      const r = await orch.call('/orch/map-heartbeat', { instanceId: game.instanceId, players: game.players.size, tick: game.tick }, cfg.heartbeatMs);
      if (r.status === 200 && r.body && r.body.registered === false) register(); // the orchestrator forgot this map
    } catch (err) {
      log('warn', 'heartbeat not answered', { err: String(err.cause || err) }); // the next one is the retry
    }
  }, cfg.heartbeatMs);

  const stop = async (signal) => {
    if (game.stopping) return;
    log('info', 'stopping', { signal, players: game.players.size });
    clearInterval(beat);
    await game.stop(Date.now() + STOP_BUDGET_MS);
    log('info', 'stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((err) => {
  log('error', 'start failed', { err: String(err) });
  process.exit(1);
});
