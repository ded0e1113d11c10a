'use strict';
// The static world and movement. The world comes from mapyard's own generator compiled
// to WebAssembly (the page's module, docs/mapgen.md "The world outside Go"), so the
// worldHash, spawn points, portals and colliders are exactly what the page and the Go
// client rebuild from the welcome's mapConfig. Movement is docs/netcode.md's integer
// step ("Movement"), written here from the doc, so that a client predicting with the
// module walks exactly where this map puts it.

const fs = require('node:fs');
const path = require('node:path');
const zlib = require('node:zlib');

const QUANTA_PER_UNIT = 16;
const BODY_RADIUS = 6; // quanta
const PLAYER_SPEED = 80; // quanta per second: 5 units/s
const CELL = 16 * QUANTA_PER_UNIT; // side of a collider bucket, in quanta

// loadGenerator runs the module (mapyard.wasm or .wasm.gz beside Go's wasm_exec.js in
// dir) and resolves to its mapyardGenerate(configJSON) function.
async function loadGenerator(dir) {
  globalThis.require = require;
  globalThis.fs = fs; // the Go runtime writes its stdout and stderr through it
  globalThis.path = path;
  require(path.join(dir, 'wasm_exec.js'));
  const gz = path.join(dir, 'mapyard.wasm.gz');
  const bytes = fs.existsSync(gz) ? zlib.gunzipSync(fs.readFileSync(gz)) : fs.readFileSync(path.join(dir, 'mapyard.wasm'));
  const go = new globalThis.Go();
  const { instance } = await WebAssembly.instantiate(bytes, go.importObject);
  go.run(instance); // its main keeps running, answering calls
  return globalThis.mapyardGenerate;
}

// q converts world centimetres to quanta: round(cm × 16 / 100), half away from zero.
function q(cm) { return Math.sign(cm) * Math.floor((Math.abs(cm) * QUANTA_PER_UNIT + 50) / 100); }

// World is the generator's JSON view of a world, in quanta, with what movement asks.
class World {
  constructor(view) {
    this.width = q(view.width);
    this.height = q(view.height);
    this.ground = null;
    if (view.nav && view.nav.cellSize > 0) { // the nav grid's ground bits: where a body may stand
      this.cell = q(view.nav.cellSize);
      this.cols = view.nav.cols;
      this.rows = view.nav.rows;
      this.ground = Buffer.from(view.ground, 'base64');
    }
    this.buckets = new Map(); // collider bucket index -> colliders that, grown by a body, reach it
    this.bcols = Math.floor(this.width / CELL) + 1;
    this.brows = Math.floor(this.height / CELL) + 1;
    for (const [, , shape, x, y, hx, hy] of view.colliders) {
      if (shape !== 1 && shape !== 2) continue;
      const c = { circle: shape === 1, x: q(x), y: q(y), hx: q(hx), hy: q(hy) };
      const [c0, r0] = this.bucketOf(c.x - c.hx - BODY_RADIUS, c.y - c.hy - BODY_RADIUS);
      const [c1, r1] = this.bucketOf(c.x + c.hx + BODY_RADIUS, c.y + c.hy + BODY_RADIUS);
      for (let r = r0; r <= r1; r++) {
        for (let k = c0; k <= c1; k++) {
          const i = r * this.bcols + k;
          if (!this.buckets.has(i)) this.buckets.set(i, []);
          this.buckets.get(i).push(c);
        }
      }
    }
    this.spawns = view.spawns.map((s) => ({ x: q(s.x), y: q(s.y) }));
    this.portals = view.portals.map((p) => ({ x: q(p.x), y: q(p.y), r: q(p.r), target: p.targetMapId }));
  }

  bucketOf(x, y) {
    return [Math.max(0, Math.min(Math.trunc(x / CELL), this.bcols - 1)), Math.max(0, Math.min(Math.trunc(y / CELL), this.brows - 1))];
  }

  // blocked: a body centred at (x, y) reaches past the bounds, stands on ground it may
  // not (water, too steep) or overlaps a collider (touching is allowed).
  blocked(x, y) {
    if (x < BODY_RADIUS || y < BODY_RADIUS || x > this.width - BODY_RADIUS || y > this.height - BODY_RADIUS) return true;
    if (this.ground) {
      const i = Math.min(Math.floor(y / this.cell), this.rows - 1) * this.cols + Math.min(Math.floor(x / this.cell), this.cols - 1);
      if ((this.ground[i >> 3] & (1 << (i & 7))) === 0) return true;
    }
    const [bc, br] = this.bucketOf(x, y);
    for (const c of this.buckets.get(br * this.bcols + bc) || []) {
      const dx = x - c.x, dy = y - c.y;
      if (c.circle) {
        if (dx * dx + dy * dy < (c.hx + BODY_RADIUS) ** 2) return true;
      } else {
        const ex = Math.max(Math.abs(dx) - c.hx, 0), ey = Math.max(Math.abs(dy) - c.hy, 0);
        if (ex * ex + ey * ey < BODY_RADIUS * BODY_RADIUS) return true;
      }
    }
    return false;
  }

  // nearestOpen is (x, y) when a body may stand there, else the centre of the nearest
  // ground cell where it may, searched ring by ring.
  nearestOpen(x, y) {
    if (!this.blocked(x, y)) return { x, y };
    const cell = this.cell || CELL / 4;
    const cols = this.ground ? this.cols : Math.floor(this.width / cell) + 1;
    const rows = this.ground ? this.rows : Math.floor(this.height / cell) + 1;
    const pc = Math.min(Math.floor(Math.max(x, 0) / cell), cols - 1), pr = Math.min(Math.floor(Math.max(y, 0) / cell), rows - 1);
    for (let ring = 0; ring < Math.max(cols, rows); ring++) {
      let best = null, bestD = -1;
      for (let r = pr - ring; r <= pr + ring; r++) {
        for (let k = pc - ring; k <= pc + ring; k++) {
          if (r < 0 || k < 0 || r >= rows || k >= cols || Math.max(Math.abs(r - pr), Math.abs(k - pc)) !== ring) continue;
          const v = { x: k * cell + Math.floor(cell / 2), y: r * cell + Math.floor(cell / 2) };
          if (this.blocked(v.x, v.y)) continue;
          const d = (v.x - x) ** 2 + (v.y - y) ** 2;
          if (bestD < 0 || d < bestD) { best = v; bestD = d; }
        }
      }
      if (best) return best;
    }
    return { x, y };
  }

  // walk moves a body at p with stride st by one input {dx, dy} at speed quanta per
  // second and hz ticks per second, and returns its new position and stride.
  walk(p, st, dx, dy, speed, hz) {
    st = st.run === 0 || st.dx !== dx || st.dy !== dy ? { dx, dy, run: 1 } : { dx, dy, run: st.run + 1 };
    const [vx, vy] = velocity(dx, dy, speed);
    const phase = st.run - 1;
    let { x, y } = p;
    const mx = displacement(vx, phase, hz), my = displacement(vy, phase, hz);
    if (mx !== 0 && !this.blocked(x + mx, y)) x += mx; // slide: each axis on its own
    if (my !== 0 && !this.blocked(x, y + my)) y += my;
    return [{ x, y }, st];
  }
}

// isqrt is floor(sqrt(n)) by integer Newton iteration.
function isqrt(n) {
  if (n < 2) return n;
  let x = n, y = Math.floor((x + 1) / 2);
  while (y < x) { x = y; y = Math.floor((x + Math.floor(n / x)) / 2); }
  return x;
}

// velocity per axis in 1/256 quantum per second, truncated toward zero.
function velocity(dx, dy, speed) {
  const sq = dx * dx + dy * dy;
  if (sq === 0) return [0, 0];
  const l = isqrt(sq * 65536);
  return [Math.trunc(speed * dx * 65536 / l), Math.trunc(speed * dy * 65536 / l)];
}

// displacement on step phase of a straight run: the first n steps together cover
// floor(n·|v|/(hz·256)).
function displacement(v, phase, hz) {
  const d = hz * 256, a = Math.abs(v), p = phase % d;
  const step = Math.floor(a * (p + 1) / d) - Math.floor(a * p / d);
  return v < 0 ? -step : step;
}

module.exports = { loadGenerator, World, q, QUANTA_PER_UNIT, PLAYER_SPEED };
