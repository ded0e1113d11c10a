'use strict';
// Checks this map's own code against mapyard's: the world of each world vector has the
// vector's worldHash, every step of random walks over it (into walls, water and the
// bounds) lands exactly where the module's movement (mapyard.replay, the page's
// prediction) puts it, and the snapshot encoder writes docs/netcode.md's example byte
// for byte.
//
//   node selftest.js DIR VECTOR.json...   (DIR holds mapyard.wasm[.gz] and wasm_exec.js)

const fs = require('node:fs');
const { loadGenerator, World, q, PLAYER_SPEED } = require('./world');
const { encodeFull, KIND } = require('./snapshot');

const HZ = 30;
const failures = [];

// docs/netcode.md, "Snapshot frames": the full snapshot of tick 300.
function checkEncoder() {
  const got = encodeFull(300, 41, 3, [
    { slot: 3, kind: KIND.player, id: 12, x: 16000, y: 8000, facing: 64 },
    { slot: 5, kind: KIND.npc, id: 7, x: 100, y: 50, facing: 128, state: 1 },
    { slot: 9, kind: KIND.npc, id: 13, x: 5, y: 5 },
    { slot: 10, kind: KIND.item, id: 30, x: 320, y: 480, template: 300 },
  ]).toString('hex');
  const want = '04ac022904' + '00' + '04' + '03010c80fa01807d0140' + '010207c80164038001' + '03020d0a0a00' + '00031e8005c00704ac02' + '00';
  if (got !== want) failures.push(`snapshot encoder: ${got}, want ${want}`);
}

// A small PCG-free generator: reproducible walks without a dependency.
function rng(seed) {
  let s = seed >>> 0;
  return () => { s = (s * 1664525 + 1013904223) >>> 0; return s / 2 ** 32; };
}

async function main() {
  const [dir, ...vectors] = process.argv.slice(2);
  const generate = await loadGenerator(dir);
  const mod = globalThis.mapyard;
  checkEncoder();
  let steps = 0, blocked = 0;
  for (const file of vectors) {
    const v = JSON.parse(fs.readFileSync(file, 'utf8'));
    const cfg = JSON.stringify(v.config);
    const out = generate(cfg);
    if (out.error || out.hash !== v.worldHash) { failures.push(`${file}: hash ${out.hash || out.error}, want ${v.worldHash}`); continue; }
    const world = new World(JSON.parse(out.world));
    const loaded = mod.loadWorld(cfg);
    const rand = rng(steps + 7);
    for (let walk = 0; walk < 8; walk++) {
      const s = world.spawns[walk % world.spawns.length] || { x: q(100), y: q(100) };
      let p = world.nearestOpen(s.x, s.y), st = { dx: 0, dy: 0, run: 0 };
      let dx = 0, dy = 0;
      for (let i = 1; i <= 1500; i++, steps++) {
        if (rand() < 0.02 || i === 1) { dx = Math.round(rand() * 254) - 127; dy = Math.round(rand() * 254) - 127; }
        const [np, nst] = world.walk(p, st, dx, dy, PLAYER_SPEED, HZ);
        const r = mod.replay(loaded.id, p.x, p.y, st.dx, st.dy, st.run, [i, dx, dy], PLAYER_SPEED, HZ);
        if (r.error || r[0] !== np.x || r[1] !== np.y || r[4] !== nst.run) {
          failures.push(`${file} walk ${walk} step ${i} from (${p.x}, ${p.y}) by (${dx}, ${dy}): here (${np.x}, ${np.y}) run ${nst.run}, module ${JSON.stringify(r)}`);
          break;
        }
        if (np.x === p.x && np.y === p.y && (dx || dy)) blocked++;
        p = np; st = nst;
      }
    }
    mod.dropWorld(loaded.id);
  }
  process.stdout.write(JSON.stringify({ steps, blocked, failures }) + '\n');
  process.exit(failures.length ? 1 : 0);
}

main().catch((err) => { process.stdout.write(JSON.stringify({ failures: [String(err.stack || err)] }) + '\n'); process.exit(2); });
