// The canvas view: the static world drawn once into an offscreen canvas (terrain and
// biomes, colliders, props, portals), then every frame the part around the camera,
// with the entities of the snapshots on top. World lengths are centimetres, entity
// positions quanta (1/16 m); y grows north in the world and down on the screen.

const BIOME_COLOURS = [
  [58, 110, 165],  // water
  [232, 217, 160], // beach
  [124, 179, 90],  // grassland
  [63, 125, 58],   // forest
  [217, 195, 122], // desert
  [138, 138, 128], // rock
  [242, 244, 247], // snow
];
const PROP_COLOURS = {
  oak: "#2f5e22", pine: "#1f4a2a", bush: "#5d9a45", flowers: "#d98cc4", boulder: "#6d6d66",
  pebbles: "#8c8c84", pillar: "#b0a07e", "wall-fragment": "#9c8a6a", cactus: "#5c8a3a",
  "dead-tree": "#6b5a44", "dune-grass": "#b8b070", palm: "#3f8a3a", driftwood: "#8a6f4c",
  reed: "#7a9a5a", "snow-pine": "#2a5a4a", "ice-rock": "#b8d0e0",
};
import { itemColour, itemGlyph } from "./hud.js";

// Entity kinds of the snapshot (docs/netcode.md, "Entity kinds": 1 player, 2 NPC, 3
// item, 4 zone), whatever game the map runs. Kinds the page does not know are drawn as
// grey discs.
const KIND_STYLES = {
  1: { fill: "#4aa3ff", stroke: "#0d2a4a", label: "player" },
  2: { fill: "#e0503a", stroke: "#4a120a", label: "NPC" },
};
// An NPC's perception state (format 2's state field): its colour and the sign drawn
// above it (idle, suspicious, alert, chasing).
const NPC_STYLES = [
  { fill: "#9aa7b4", stroke: "#2a3038", sign: "" },
  { fill: "#f2c94c", stroke: "#4a3a08", sign: "?" },
  { fill: "#f2994a", stroke: "#4a2508", sign: "!" },
  { fill: "#eb3b2f", stroke: "#4a0c08", sign: "!!" },
];
const KIND_PLAYER = 1;
const KIND_ITEM = 3;
const KIND_ZONE = 4;
// A player's flags (its state byte): marked (in tag, the player who is it) and
// shielded (in tag, cannot be tagged now).
const PLAYER_MARKED = 1;
const PLAYER_SHIELDED = 2;
// A zone's colour (its state byte): 0 neutral, then the game's colours.
const ZONE_COLOURS = ["rgba(255, 255, 255, 0.18)", "rgba(235, 59, 47, 0.25)", "rgba(74, 163, 255, 0.25)",
  "rgba(111, 207, 151, 0.25)", "rgba(242, 201, 76, 0.25)"];
const OTHER_KIND = { fill: "#b0b0b0", stroke: "#303030", label: "entity" };
// Drawn radius of a prop of each kind at scale 1000, in metres (a canopy is wider than
// the trunk its collider stands for).
const PROP_SIZES = { oak: 2.4, pine: 1.8, bush: 0.9, flowers: 0.4, boulder: 1.2, pebbles: 0.4, pillar: 0.6,
  "wall-fragment": 1.0, cactus: 0.5, "dead-tree": 1.2, "dune-grass": 0.5, palm: 1.8, driftwood: 0.7, reed: 0.4,
  "snow-pine": 1.8, "ice-rock": 1.0 };
const BUCKET_M = 50;        // metres per side of a bucket of props and colliders
const ZOOM = 6;             // px per metre on screen
const QUANTA = 16;          // quanta per metre

export class View {
  constructor(canvas) {
    this.canvas = canvas;
    this.ctx = canvas.getContext("2d");
    this.world = null;
    this.static = null;
    this.frames = 0;
    this.templates = []; // the module's itemTemplates, in wire order
    this.resize();
    addEventListener("resize", () => this.resize());
  }

  resize() {
    this.canvas.width = Math.max(1, this.canvas.clientWidth || innerWidth);
    this.canvas.height = Math.max(1, this.canvas.clientHeight || innerHeight);
  }

  // setWorld prepares the static world of w (mapyard.loadWorld's answer): the terrain
  // and biomes pre-rendered once into an offscreen canvas of one pixel per terrain cell
  // (scaled up smoothly every frame), and props and colliders sorted into buckets so a
  // frame draws only those in view, crisp at any zoom.
  setWorld(w) {
    this.world = w;
    if (!w) { this.static = null; return; }
    const t = w.terrain;
    const heights = new Uint16Array(t.heights.buffer, t.heights.byteOffset, t.heights.length / 2);
    const img = new ImageData(t.cols, t.rows);
    let lo = Infinity, hi = -Infinity;
    for (const h of heights) { lo = Math.min(lo, h); hi = Math.max(hi, h); }
    const stride = t.cols + 1;
    for (let row = 0; row < t.rows; row++) {
      for (let col = 0; col < t.cols; col++) {
        const b = BIOME_COLOURS[t.biomes[row * t.cols + col]] || [255, 0, 255];
        const i0 = row * stride + col;
        const h = (heights[i0] + heights[i0 + 1] + heights[i0 + stride] + heights[i0 + stride + 1]) / 4;
        const shade = 0.82 + 0.3 * (hi > lo ? (h - lo) / (hi - lo) : 0.5);
        const p = ((t.rows - 1 - row) * t.cols + col) * 4; // rows flipped: y grows north
        img.data[p] = Math.min(255, b[0] * shade);
        img.data[p + 1] = Math.min(255, b[1] * shade);
        img.data[p + 2] = Math.min(255, b[2] * shade);
        img.data[p + 3] = 255;
      }
    }
    const off = document.createElement("canvas");
    off.width = t.cols;
    off.height = t.rows;
    off.getContext("2d").putImageData(img, 0, 0);
    this.static = off;

    // Buckets of BUCKET_M metres: [props indices, collider indices]; colliders larger
    // than a bucket (boundary walls) are drawn from their own list.
    this.buckets = new Map();
    this.large = [];
    this.props = new Int32Array(w.props.buffer, w.props.byteOffset, w.props.length / 4);
    this.colliders = new Int32Array(w.colliders.buffer, w.colliders.byteOffset, w.colliders.length / 4);
    const bucket = (xcm, ycm) => {
      const k = Math.floor(xcm / 100 / BUCKET_M) * 65536 + Math.floor(ycm / 100 / BUCKET_M);
      let b = this.buckets.get(k);
      if (!b) { b = [[], []]; this.buckets.set(k, b); }
      return b;
    };
    for (let i = 0; i + w.propStride <= this.props.length; i += w.propStride) {
      bucket(this.props[i + 1], this.props[i + 2])[0].push(i);
    }
    for (let i = 0; i + w.colliderStride <= this.colliders.length; i += w.colliderStride) {
      const c = this.colliders;
      if (c[i + 3] > BUCKET_M * 50 || c[i + 4] > BUCKET_M * 50) this.large.push(i);
      else bucket(c[i + 1], c[i + 2])[1].push(i);
    }
  }

  // draw renders one frame: the world around camera (quanta), the portals with their
  // destination, zones, every other entity and the player's own, players with their
  // names (e.name) above them and their flags. marks: {pending: Set of item entity ids
  // the player is picking up, target: the item entity E would pick up, selfName: the
  // player's own name, selfState: its own flags}.
  draw(camera, self, others, marks = {}) {
    const g = this.ctx, cw = this.canvas.width, ch = this.canvas.height;
    g.fillStyle = "#1b1f24";
    g.fillRect(0, 0, cw, ch);
    if (!this.static || !camera) return;
    const w = this.world, t = w.terrain;
    const camX = camera.x / QUANTA, camY = camera.y / QUANTA;
    // Screen position of a world point in metres.
    const sx = (m) => (m - camX) * ZOOM + cw / 2;
    const sy = (m) => (camY - m) * ZOOM + ch / 2;
    // Terrain: the offscreen canvas has one pixel per cell, its top row at y = rows·cell.
    const cell = t.cellSize / 100;
    g.imageSmoothingEnabled = true;
    g.drawImage(this.static, sx(0), sy(t.rows * cell), t.cols * cell * ZOOM, t.rows * cell * ZOOM);

    // Props and colliders of the buckets in view.
    const left = camX - cw / 2 / ZOOM, right = camX + cw / 2 / ZOOM;
    const bottom = camY - ch / 2 / ZOOM, top = camY + ch / 2 / ZOOM;
    const c = this.colliders, p = this.props;
    const collider = (i) => {
      const x = c[i + 1] / 100, y = c[i + 2] / 100, hx = c[i + 3] / 100, hy = c[i + 4] / 100;
      if (c[i] === 1) {
        g.fillStyle = "rgba(60, 45, 30, 0.9)";
        g.beginPath();
        g.arc(sx(x), sy(y), Math.max(1, hx * ZOOM), 0, Math.PI * 2);
        g.fill();
      } else {
        g.fillStyle = hx > BUCKET_M / 2 || hy > BUCKET_M / 2 ? "#3a3f46" : "rgba(120, 100, 70, 0.95)";
        g.fillRect(sx(x - hx), sy(y + hy), 2 * hx * ZOOM, 2 * hy * ZOOM);
      }
    };
    for (const i of this.large) collider(i);
    for (let bx = Math.floor(left / BUCKET_M) - 1; bx <= Math.floor(right / BUCKET_M) + 1; bx++) {
      for (let by = Math.floor(bottom / BUCKET_M) - 1; by <= Math.floor(top / BUCKET_M) + 1; by++) {
        const b = this.buckets.get(bx * 65536 + by);
        if (!b) continue;
        for (const i of b[0]) {
          const kind = w.propKinds[p[i]];
          const size = PROP_SIZES[kind && kind.name] || 0.8;
          g.fillStyle = PROP_COLOURS[kind && kind.name] || "#556b2f";
          g.beginPath();
          g.arc(sx(p[i + 1] / 100), sy(p[i + 2] / 100), Math.max(1.5, size * ZOOM * p[i + 3] / 1000), 0, Math.PI * 2);
          g.fill();
        }
        for (const i of b[1]) collider(i);
      }
    }

    g.font = "12px system-ui, sans-serif";
    g.textAlign = "center";
    for (const pt of w.portals) {
      const x = sx(pt.x / 100), y = sy(pt.y / 100), r = pt.radius / 100 * ZOOM;
      if (x < -r - 100 || y < -r - 100 || x > cw + r + 100 || y > ch + r + 100) continue;
      g.fillStyle = "rgba(150, 80, 220, 0.45)";
      g.strokeStyle = "#f0dcff";
      g.lineWidth = 2;
      g.beginPath();
      g.arc(x, y, r, 0, Math.PI * 2);
      g.fill();
      g.stroke();
      g.fillStyle = "#fff";
      g.fillText(`→ ${pt.target}`, x, y - r - 6);
    }
    g.fillStyle = "rgba(255, 255, 255, 0.7)";
    for (const sp of w.spawns) g.fillRect(sx(sp.x / 100) - 2, sy(sp.y / 100) - 2, 4, 4);
    for (const e of others) {
      if (e.kind !== KIND_ZONE) continue;
      const rz = (e.template || 0) / 100 * ZOOM, x = sx(e.x / QUANTA), y = sy(e.y / QUANTA);
      if (x < -rz - 20 || y < -rz - 20 || x > cw + rz + 20 || y > ch + rz + 20) continue;
      g.fillStyle = ZONE_COLOURS[e.state] || ZONE_COLOURS[0];
      g.strokeStyle = "rgba(255, 255, 255, 0.6)";
      g.lineWidth = 1.5;
      g.beginPath();
      g.arc(x, y, Math.max(3, rz), 0, Math.PI * 2);
      g.fill();
      g.stroke();
    }
    const r = Math.max(4, 0.375 * ZOOM * 1.6);
    for (const e of others) {
      const x = sx(e.x / QUANTA), y = sy(e.y / QUANTA);
      if (e.kind === KIND_ZONE || x < -20 || y < -20 || x > cw + 20 || y > ch + 20) continue;
      if (e.kind === KIND_ITEM) this.item(x, y, e, marks);
      else if (e.kind === 2) this.npc(x, y, r, e);
      else this.body(x, y, r, KIND_STYLES[e.kind] || OTHER_KIND, false);
      if (e.kind === KIND_PLAYER) this.flags(x, y, r, e.state);
      if (e.name) this.label(x, y - r - 5, e.name, "#e8f1ff");
    }
    if (self) {
      const x = sx(self.x / QUANTA), y = sy(self.y / QUANTA);
      this.body(x, y, r + 1, { fill: "#ffd23f", stroke: "#1b1f24" }, true);
      this.flags(x, y, r + 1, marks.selfState || 0);
      if (marks.selfName) this.label(x, y - r - 6, marks.selfName, "#ffe58a");
    }
    this.frames++;
  }

  // flags rings a player by its flags: red with "IT" below when marked, white and
  // dashed when shielded.
  flags(x, y, r, state) {
    const g = this.ctx;
    if (state & PLAYER_SHIELDED) {
      g.strokeStyle = "#ffffff";
      g.setLineDash([3, 3]);
      g.lineWidth = 2;
      g.beginPath();
      g.arc(x, y, r + 7, 0, Math.PI * 2);
      g.stroke();
      g.setLineDash([]);
    }
    if (state & PLAYER_MARKED) {
      g.strokeStyle = "#eb3b2f";
      g.lineWidth = 3;
      g.beginPath();
      g.arc(x, y, r + 3, 0, Math.PI * 2);
      g.stroke();
      this.label(x, y + r + 16, "IT", "#ff6b5e");
    }
  }

  // label writes a player's name centred above it, outlined so it reads on any ground.
  label(x, y, text, colour) {
    const g = this.ctx;
    g.font = "600 12px system-ui, sans-serif";
    g.textAlign = "center";
    g.lineWidth = 3;
    g.strokeStyle = "rgba(0, 0, 0, 0.75)";
    g.strokeText(text, x, y);
    g.fillStyle = colour;
    g.fillText(text, x, y);
  }

  // item draws an item: a square of its template's colour with its glyph, faded with a
  // dashed ring while its change of owner is pending, ringed when E would take it.
  item(x, y, e, marks) {
    const g = this.ctx, t = this.templates[e.template - 1];
    const pending = (e.state & 1) || (marks.pending && marks.pending.has(e.id));
    const h = 5;
    g.globalAlpha = pending ? 0.45 : 1;
    g.fillStyle = itemColour(t ? t.id : e.template);
    g.fillRect(x - h, y - h, 2 * h, 2 * h);
    g.strokeStyle = "#1b1f24";
    g.lineWidth = 1;
    g.strokeRect(x - h, y - h, 2 * h, 2 * h);
    g.fillStyle = "#111";
    g.font = "bold 9px system-ui, sans-serif";
    g.textAlign = "center";
    g.textBaseline = "middle";
    g.fillText(itemGlyph(t), x, y + 0.5);
    g.textBaseline = "alphabetic";
    g.globalAlpha = 1;
    if (pending || marks.target === e.id) {
      g.strokeStyle = pending ? "#ffffff" : "#ffd23f";
      g.setLineDash(pending ? [3, 3] : []);
      g.lineWidth = 2;
      g.beginPath();
      g.arc(x, y, h + 5, 0, Math.PI * 2);
      g.stroke();
      g.setLineDash([]);
    }
  }

  // npc draws an NPC in the colour of its perception state, with its sign above.
  npc(x, y, r, e) {
    const st = NPC_STYLES[e.state] || NPC_STYLES[0];
    this.body(x, y, r, st, false);
    if (st.sign) {
      const g = this.ctx;
      g.font = "bold 13px system-ui, sans-serif";
      g.textAlign = "center";
      g.fillStyle = st.fill;
      g.strokeStyle = "#000";
      g.lineWidth = 3;
      g.strokeText(st.sign, x, y - r - 4);
      g.fillText(st.sign, x, y - r - 4);
    }
  }

  body(x, y, r, style, self) {
    const g = this.ctx;
    g.fillStyle = style.fill;
    g.strokeStyle = style.stroke;
    g.lineWidth = self ? 3 : 1.5;
    g.beginPath();
    g.arc(x, y, r, 0, Math.PI * 2);
    g.fill();
    g.stroke();
  }
}
