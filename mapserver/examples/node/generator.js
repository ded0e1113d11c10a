'use strict';
// The world generator on a thread of its own: generating a 2 km world takes a few
// hundred milliseconds of WebAssembly (seconds while the module is still cold on a busy
// host), and the control listener must answer /control/start-instance within the
// orchestrator's 2 s meanwhile, as the tick must keep running in a map that holds one.

const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');
const { loadGenerator } = require('./world');

// Generator runs the module in a worker; generate(configJSON) resolves to the module's
// answer: {world, hash} or {error}.
class Generator {
  constructor(dir) {
    this.worker = new Worker(__filename, { workerData: { dir } });
    this.waiting = new Map();
    this.next = 0;
    // ready resolves once the module runs: a config it refuses is then refused at once.
    this.ready = new Promise((resolve) => { this.loaded = resolve; });
    this.worker.on('message', ({ id, out }) => {
      if (id === 0) return this.loaded();
      this.waiting.get(id)(out);
      return this.waiting.delete(id);
    });
    this.worker.on('error', (err) => { throw err; }); // a generator that died is a crash
  }

  generate(configJSON) {
    const id = ++this.next;
    return new Promise((resolve) => { this.waiting.set(id, resolve); this.worker.postMessage({ id, configJSON }); });
  }
}

// WARM_UP is a small world generated once at load (docs/world-vectors/small.json's
// config): the first call into the module runs its code cold, several times slower.
const WARM_UP = JSON.stringify({
  schemaVersion: 1, mapId: 'small', instanceId: 'small-1', seed: 1, bounds: { width: 200, height: 200 },
  terrain: { cellSize: 10, maxHeight: 120, featureSize: 800, octaves: 5, persistence: 500, waterLevel: 300 },
  biome: { moistureScale: 500, moistureBias: 0, beachHeight: 2, rockLine: 720, snowLine: 900, dryBelow: 330, wetAbove: 560 },
  propSetIds: ['temperate-trees', 'rocks', 'ruins', 'coast'],
  staticCollider: { navCellSize: 4, maxWalkableSlope: 700, boundaryWalls: true, wallThickness: 4, blockWater: true },
  generationRules: { propDensity: 1200, npcDensity: 25, interactableDensity: 15, spawnPoints: 3, portals: [{ targetMapId: 'frontier', count: 2 }] },
});

if (!isMainThread) {
  loadGenerator(workerData.dir).then((generate) => {
    generate(WARM_UP);
    parentPort.on('message', ({ id, configJSON }) => {
      const out = generate(configJSON);
      parentPort.postMessage({ id, out: out.error ? { error: out.error } : { world: out.world, hash: out.hash } });
    });
    parentPort.postMessage({ id: 0 });
  });
}

module.exports = { Generator };
