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

if (!isMainThread) {
  loadGenerator(workerData.dir).then((generate) => {
    parentPort.on('message', ({ id, configJSON }) => {
      const out = generate(configJSON);
      parentPort.postMessage({ id, out: out.error ? { error: out.error } : { world: out.world, hash: out.hash } });
    });
    parentPort.postMessage({ id: 0 });
  });
}

module.exports = { Generator };
