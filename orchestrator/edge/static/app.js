// The page: loads the WebAssembly module (the server's own generator, movement and
// snapshot decoder), asks who plays (the browser's key, or a guest), and runs the game
// loop: keys to inputs at the tick rate, a frame per animation frame, the status line,
// the event log and the debug overlay (TAB). The Menu button (or Escape) leaves the
// game for the menu, where the player may pick, create or switch characters.

import { Session, State } from "./session.js";
import { View } from "./view.js";
import { Menu } from "./menu.js";
import { Hud } from "./hud.js";
import { Names } from "./names.js";
import { status as statusText, trouble } from "./words.js";

const KEY_STORE = "mapyard.authKey";
const INTERPOLATION_MS = 100;
const LOG_LINES = 6;

const $ = (id) => document.getElementById(id);
const loadStarted = performance.now();

// debug is what the overlay shows and what automated checks of the page read.
// firstFrameMs is the time the page worked to show the game: loading the module
// (readyMs) and, from the last Play, joining and drawing the first frame — never the
// time the player spent in the menu.
//
// extra holds entities drawn in every frame besides the snapshots' (none unless a
// measurement puts some there: docs/assets.md, "Frame time"); frameTimes is the last
// FRAME_WINDOW frames' draw times and intervals, which the overlay sums up.
const debug = { firstFrameMs: 0, readyMs: 0, wasmMs: 0, frames: 0, frameMs: 0, state: "loading", states: [], timings: {}, events: [],
  extra: [], frameTimes: { draw: [], interval: [] } };
globalThis.mapyardDebug = debug;

// ?still stops the animation clock (view.clock): a scene where nothing moves is drawn
// the same in every frame, which the page's screenshot tests compare with a golden.
const STILL = new URLSearchParams(location.search).has("still");
const FRAME_WINDOW = 240;

// frameStats sums up debug.frameTimes: median and 99th percentile of the draw time and
// of the interval between frames, in ms.
function frameStats() {
  const q = (xs, p) => {
    if (!xs.length) return 0;
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.floor(p * s.length))];
  };
  const { draw, interval } = debug.frameTimes;
  return { drawMedian: q(draw, 0.5), drawP99: q(draw, 0.99), intervalMedian: q(interval, 0.5), intervalP99: q(interval, 0.99),
    frames: draw.length };
}
debug.frameStats = frameStats;

async function loadModule() {
  const go = new Go();
  const url = new URL("mapyard.wasm", import.meta.url);
  const started = performance.now();
  const resp = await fetch(url);
  if (!resp.ok) {
    let msg = `HTTP ${resp.status}`;
    try { msg = (await resp.json()).error.message; } catch { /* not JSON */ }
    throw new Error(`the client module did not load: ${msg}`);
  }
  const { instance } = await WebAssembly.instantiateStreaming(resp, go.importObject);
  go.run(instance); // defines globalThis.mapyard and keeps running
  debug.wasmMs = performance.now() - started;
  return globalThis.mapyard;
}

// authKey returns the browser's key, creating it once: 32 random bytes, base64url.
function authKey() {
  let k = localStorage.getItem(KEY_STORE);
  if (!k) {
    const b = crypto.getRandomValues(new Uint8Array(32));
    k = btoa(String.fromCharCode(...b)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
    localStorage.setItem(KEY_STORE, k);
  }
  return k;
}

function log(text, kind = "info") {
  const line = document.createElement("div");
  line.textContent = `${new Date().toLocaleTimeString()} ${text}`;
  if (kind === "error") line.className = "error";
  const box = $("log");
  box.appendChild(line);
  while (box.children.length > LOG_LINES) box.removeChild(box.firstChild);
}

function banner(text) {
  $("banner").textContent = text;
  $("banner").hidden = !text;
}

// controls holds what keys other than walking do once the game runs (E: pickup,
// Escape: back to the menu).
const controls = {};

// game is the game being played ({session, hud}), null in the menu: loops and hooks
// of a game the player left stop at their next turn.
let game = null;
// PLAYERS_EVERY_MS: how often the offer's list of players nearby is brought up to date.
const PLAYERS_EVERY_MS = 500;

// Keys held now; arrows and WASD give the direction of the next input.
const held = new Set();
function direction() {
  let dx = 0, dy = 0;
  if (held.has("KeyD") || held.has("ArrowRight")) dx += 127;
  if (held.has("KeyA") || held.has("ArrowLeft")) dx -= 127;
  if (held.has("KeyW") || held.has("ArrowUp")) dy += 127;
  if (held.has("KeyS") || held.has("ArrowDown")) dy -= 127;
  return [dx, dy];
}

// play runs the game for identity until the player goes back to the menu (leave), or
// the server refuses it for good, which brings the menu back with the reason.
function play(wasm, view, identity, menu) {
  debug.playAt = performance.now();
  debug.firstFrameMs = 0;
  debug.firstFrameAfterPlayMs = 0;
  debug.timings = {};
  const status = $("status");
  let lastReconnect = "";
  const me = {};
  const session = new Session(wasm, identity, {
    onState(s, detail) {
      if (game !== me) return; // a game left for the menu
      debug.state = s;
      debug.states.push(s);
      if (!debug.timings[s]) debug.timings[s] = performance.now() - debug.playAt;
      if (debug.states.length > 64) debug.states.shift();
      status.dataset.state = s;
      status.textContent = statusText(s, detail, session.welcome && session.welcome.mapId);
      $("loading").hidden = !(s === State.transferring || s === State.joining && !session.world);
      $("loading-text").textContent = s === State.transferring ? "Through the portal…" : "Joining…";
      if (s === State.reconnecting && detail !== lastReconnect) log(`Reconnecting: ${trouble(detail)}…`);
      lastReconnect = s === State.reconnecting ? detail : "";
      if (s === State.playing) hud.render();
      if (s === State.stopped) banner(detail);
      if (s === State.error) leave(me, `${statusText(s, detail)} (${String(detail).split(":")[0]})`);
    },
    onWorld(world, welcome) {
      if (game !== me) return;
      const t0 = performance.now();
      const sets = welcome.mapConfig && welcome.mapConfig.assetSets;
      view.setWorld(world, sets).then(() => {
        if (game !== me) return;
        debug.assetSets = view.sprites.sets.map((m) => `${m.id}@${m.version}`);
        debug.missingAssetSets = view.sprites.missing;
        if (view.sprites.missing.length) {
          const text = `Asset set ${view.sprites.missing.join(", ")} is missing on this host: drawing placeholders`;
          log(text, "error");
          banner(text);
        }
      });
      debug.renderMs = performance.now() - t0;
      debug.generateMs = world ? world.generateMs : 0;
      banner(session.worldError);
      if (session.worldError) log(session.worldError, "error");
      log(`Entered ${welcome.mapId}${world ? ` (world generated in ${world.generateMs.toFixed(0)} ms)` : ""}`);
    },
    onEvent: (text, kind) => { if (game === me) log(text, kind); },
    onGame(msg) {
      if (game !== me) return;
      if (msg.name === "names") names.learn(msg.data || {});
      debug.events.push(msg);
      if (debug.events.length > 64) debug.events.shift();
      hud.event(msg);
    },
    onAnswer(cmd, err) {
      if (cmd.feature === "players") names.refused(cmd, err);
      else if (game === me) hud.answer(cmd, err);
    },
  });
  const names = new Names(session);
  const hud = new Hud(session, log, names);
  Object.assign(me, { session, hud, view, menu });
  game = me;
  view.templates = wasm.itemTemplates || [];
  debug.session = session;
  debug.view = view;
  debug.hud = hud;
  debug.names = names;
  controls.pickup = () => hud.pickup();
  controls.menu = () => leave(me);
  $("to-menu").hidden = false;
  session.start();
  const framesAtPlay = view.frames;

  // Inputs at the simulation's tick rate.
  let nextStep = performance.now();
  const stepLoop = () => {
    if (game !== me) return;
    const hz = (session.welcome && session.welcome.tickHz) || 30;
    const now = performance.now();
    if (now - nextStep > 250) nextStep = now; // the tab slept: no burst of old inputs
    while (nextStep <= now) {
      const [dx, dy] = direction();
      session.step(dx, dy);
      nextStep += 1000 / hz;
    }
    setTimeout(stepLoop, Math.max(1, nextStep - performance.now()));
  };
  stepLoop();

  let playersAt = 0, lastFrame = 0;
  const frame = (now) => {
    if (game !== me) return;
    const t0 = performance.now();
    const self = session.selfPosition(now);
    const target = hud.pickable();
    names.ask(now);
    const others = session.others(now, INTERPOLATION_MS);
    for (const e of others) if (e.kind === 1) e.name = (names.of(e.id) || {}).name || "";
    if (debug.extra.length) others.push(...debug.extra);
    const mine = session.latest().get(session.selfId);
    view.draw(self || session.server, self, others,
      { pending: hud.pendingIds(), target: target && target.entity.id, selfName: session.selfName(), selfState: mine ? mine.state : 0 });
    if (view.frames > framesAtPlay && !debug.firstFrameMs) {
      debug.firstFrameAfterPlayMs = performance.now() - debug.playAt;
      debug.firstFrameMs = debug.readyMs + debug.firstFrameAfterPlayMs;
    }
    if (now - playersAt > PLAYERS_EVERY_MS) { playersAt = now; hud.players(); }
    debug.frames = view.frames;
    debug.frameMs = performance.now() - t0;
    const times = debug.frameTimes;
    times.draw.push(debug.frameMs);
    if (lastFrame) times.interval.push(now - lastFrame);
    lastFrame = now;
    if (times.draw.length > FRAME_WINDOW) times.draw.shift();
    if (times.interval.length > FRAME_WINDOW) times.interval.shift();
    if (!$("overlay").hidden) $("overlay").textContent = overlay(session, now);
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
}

// leave ends game g for the menu: its connection closes (the map keeps the character a
// few seconds for a resume, then saves and releases it), its panels go, and the menu
// lists the key's characters again, with message (why the game ended) when there is one.
function leave(g, message = "") {
  if (game !== g) return;
  game = null;
  controls.pickup = controls.menu = null;
  held.clear();
  g.session.leave();
  g.view.setWorld(null);
  g.view.draw(null, null, []);
  for (const id of ["inventory", "trade", "loading", "to-menu"]) $(id).hidden = true;
  banner("");
  $("status").dataset.state = "menu";
  $("status").textContent = "Choose who plays";
  debug.state = "menu";
  debug.states.push("menu");
  debug.menuAt = performance.now();
  g.menu.show();
  if (message) g.menu.error(message);
}

// overlay is the debug overlay's text (TAB).
function overlay(s, now) {
  const w = s.welcome || {};
  const r = s.rates(now);
  const q = (v) => (v / 16).toFixed(2);
  const f = frameStats();
  return [
    `state        ${s.state}`,
    `instance     ${w.instanceId || "-"} (${w.mapId || "-"})`,
    `character    ${s.selfName() || "-"}${s.identity.authKey ? "" : " (guest)"} ${w.characterId || ""}`,
    `server tick  ${s.stats.lastTick}`,
    `rtt          ${s.stats.rtt.toFixed(1)} ms`,
    `input seq    sent ${s.stats.sent} · acked ${s.stats.acked}`,
    `pending      ${s.pending.length}`,
    `snapshots    ${r.snapshotHz}/s · ${r.kbps.toFixed(1)} kbit/s`,
    `in view      ${s.entitiesInView()}${s.viewCap ? ` (capped: ${s.viewCap.inView} nearby)` : ""}`,
    `prediction   error ${q(s.stats.predictionError)} m (max ${q(s.stats.maxPredictionError)})`,
    `position     ${s.predicted ? `${q(s.predicted.x)}, ${q(s.predicted.y)}` : "-"}`,
    `world        ${s.worldError ? "MISMATCH" : (s.world ? "hash ok " + s.world.hash.slice(0, 12) : "-")}`,
    `speed        ${(s.speed() / 16).toFixed(4)} u/s${s.inventory ? "" : " (default)"}`,
    `assets       ${(debug.assetSets || []).join(", ") || "-"}${debug.missingAssetSets && debug.missingAssetSets.length ? ` · MISSING ${debug.missingAssetSets.join(", ")}` : ""}`,
    `reconnects   ${s.stats.reconnects} · rejoins ${s.stats.rejoins} · transfers ${s.stats.transfers}`,
    `frame time   ${f.intervalMedian.toFixed(1)} ms median · ${f.intervalP99.toFixed(1)} p99 (${f.intervalMedian ? (1000 / f.intervalMedian).toFixed(0) : "-"} fps)`,
    `frame draw   ${f.drawMedian.toFixed(2)} ms median · ${f.drawP99.toFixed(2)} p99 (last ${f.frames} frames)`,
    `first frame  ${debug.firstFrameMs.toFixed(0)} ms (load ${debug.readyMs.toFixed(0)} + join ${(debug.firstFrameAfterPlayMs || 0).toFixed(0)})`,
  ].join("\n");
}

addEventListener("keydown", (e) => {
  if (e.code === "Tab") {
    e.preventDefault();
    $("overlay").hidden = !$("overlay").hidden;
    return;
  }
  if (e.target instanceof HTMLButtonElement && (e.code === "Enter" || e.code === "Space")) return;
  if (e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement) return;
  if (e.code === "KeyE" && !e.repeat && controls.pickup) { controls.pickup(); return; }
  if (e.code === "Escape" && controls.menu) { controls.menu(); return; }
  held.add(e.code);
  if (e.code.startsWith("Arrow")) e.preventDefault();
});
addEventListener("keyup", (e) => held.delete(e.code));
addEventListener("blur", () => held.clear());

async function main() {
  const view = new View($("view"));
  if (STILL) view.clock = () => 0;
  view.draw(null, null, []);
  $("to-menu").onclick = () => { if (controls.menu) controls.menu(); };
  try {
    const wasm = await loadModule();
    $("status").textContent = "Choose who plays";
    debug.readyMs = performance.now() - loadStarted;
    debug.state = "menu";
    const menu = new Menu(authKey, () => !!localStorage.getItem(KEY_STORE), (identity) => {
      try {
        play(wasm, view, identity, menu);
      } catch (err) {
        banner(`the game did not start: ${err.message || err}`);
        debug.state = "error";
        throw err;
      }
    });
    debug.menu = menu;
    menu.show();
  } catch (err) {
    $("status").dataset.state = "error";
    $("status").textContent = String(err.message || err);
    banner(String(err.message || err));
    debug.state = "error";
  }
}

main();
