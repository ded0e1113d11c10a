'use strict';
// Calls to the orchestrator (docs/map-contract.md, "What the map calls"): POST of JSON
// with the container's credential. The retry rule is the contract's: no answer or a 5xx
// may be sent again, the same request, with backoff; a 4xx never unchanged.

const crypto = require('node:crypto');

class Orch {
  constructor(baseURL, credential, log) {
    this.base = baseURL.replace(/\/$/, '');
    this.credential = credential;
    this.log = log;
  }

  // call sends body (an object, or JSON text) once. It resolves to {status, body}, body
  // the parsed answer (an error answer's is {error: {code, message}}), or rejects when
  // no answer came within timeoutMs.
  async call(route, body, timeoutMs = 5000) {
    const res = await fetch(this.base + route, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Mapyard-Secret': this.credential },
      body: typeof body === 'string' ? body : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let parsed = null;
    try { parsed = JSON.parse(text); } catch { /* an error page: the status says enough */ }
    return { status: res.status, body: parsed };
  }

  // retry sends body until it gets an answer that is not a 5xx, doubling the wait from
  // 100 ms to 2 s, and gives up (resolving null) once deadline (ms since the epoch) passes.
  async retry(route, body, deadline = Infinity) {
    for (let wait = 100; ; wait = Math.min(wait * 2, 2000)) {
      try {
        const r = await this.call(route, body, Math.max(100, Math.min(5000, deadline - Date.now())));
        if (r.status < 500) return r;
        this.log('warn', 'orchestrator answered 5xx', { route, status: r.status });
      } catch (err) {
        this.log('warn', 'orchestrator unreachable', { route, err: String(err.cause || err) });
      }
      if (Date.now() + wait > deadline) return null;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

// persistBody is a /orch/persist-snapshot request whose payloadHash is the SHA-256 of
// the payload's bytes exactly as they stand in the body: the payload is serialised once
// and spliced in.
function persistBody({ instanceId, partition, revision, epoch, simCoreVersion, mapTick, payload }) {
  const p = JSON.stringify(payload);
  const hash = crypto.createHash('sha256').update(p).digest('hex');
  const head = { instanceId, partition, revision };
  if (epoch !== undefined) head.epoch = epoch;
  const env = JSON.stringify({ schemaVersion: 1, simCoreVersion, payloadHash: hash, mapTick, serverTimeMs: Date.now() });
  return JSON.stringify(head).slice(0, -1) + ',"envelope":' + env.slice(0, -1) + ',"payload":' + p + '}}';
}

module.exports = { Orch, persistBody };
