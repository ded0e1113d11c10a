// The canvas view: the biome colours drawn once into an offscreen canvas, then every
// frame the part around the camera: terrain tiles, props, portals, items and characters
// with the sprites of the map's asset sets (sprites.js), in depth order. World lengths are centimetres, entity
// positions quanta (1/16 m); y grows north in the world and down on the screen.

// Biome names by the world's biome numbers: the keys of an asset set's terrain.
const BIOME_NAMES = ["water", "beach", "grassland", "forest", "desert", "rock", "snow"];
const BIOME_COLOURS = [
  [58, 110, 165],  // water
  [232, 217, 160], // beach
  [124, 179, 90],  // grassland
  [63, 125, 58],   // forest
  [217, 195, 122], // desert
  [138, 138, 128], // rock
  [242, 244, 247], // snow
];
import { itemColour, itemGlyph } from "./hud.js";
import { Sprites } from "./sprites.js";

// Entity kinds of the snapshot (docs/netcode.md, "Entity kinds": 1 player, 2 NPC, 3
// item, 4 zone), whatever game the map runs: players and NPCs are drawn with the asset
// sets' characters, kinds the page does not know as grey discs.
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
const BUCKET_M = 50;        // metres per side of a bucket of props and colliders
const ZOOM = 16;            // px per metre on screen: the default set's characters at one pixel per pixel
const TERRAIN_TINT = 0.35;  // how much of the biome colours (smooth between cells, shaded by height) lies over the tiles
const CHUNK_M = 32;         // metres per side of a painted terrain chunk
const CHUNKS_KEPT = 24;     // painted chunks kept (2 MB each at ZOOM 16)
const MINIMAP_PX = 160;     // the minimap's longer side, at most
const MOVING_MS = 200;      // a character that moved within this long walks, else stands
const QUANTA = 16;          // quanta per metre

export class View {
  constructor(canvas) {
    this.canvas = canvas;
    this.ctx = canvas.getContext("2d");
    this.world = null;
    this.static = null;
    this.frames = 0;
    this.templates = []; // the module's itemTemplates, in wire order
    this.sprites = new Sprites();
    this.chunks = new Map();   // painted terrain chunks (terrainChunk), least recently used first
    this.spare = null;         // a chunk canvas to paint again
    this.motion = new Map();   // entity id ("self" for the player) → {x, y, dir, at}
    // clock is the animation clock (ms): walking frames and whether a character walks
    // follow it. The page's ?still switch stops it, so that a screenshot of a scene
    // where nothing moves is the same every time.
    this.clock = () => performance.now();
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
  //
  // assetSets (the MapConfig's) names the sprites to draw with; it resolves once their
  // manifests are loaded (or found missing: sprites.missing).
  setWorld(w, assetSets) {
    this.world = w;
    this.motion.clear();
    if (!w) { this.static = null; return Promise.resolve(); }
    this.chunks.clear();
    const loading = this.sprites.load(assetSets).then(() => this.chunks.clear());
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
    return loading;
  }

  // draw renders one frame: the terrain around camera (quanta) from the asset sets'
  // tiles, tinted by biome and height; portals with their destination; zones and items
  // on the ground; then props and characters in depth order (lower on screen in front),
  // characters walking by their movement, with their names (e.name) above them and
  // their flags. A sprite no set has is drawn as the placeholder, never left out.
  // marks: {pending: Set of item entity ids the player is picking up, target: the item
  // entity E would pick up, selfName: the player's own name, selfState: its own flags}.
  draw(camera, self, others, marks = {}) {
    const g = this.ctx, cw = this.canvas.width, ch = this.canvas.height;
    g.fillStyle = "#1b1f24";
    g.fillRect(0, 0, cw, ch);
    if (!this.static || !camera) return;
    const now = this.clock();
    const w = this.world;
    const camX = camera.x / QUANTA, camY = camera.y / QUANTA;
    // Screen position of a world point in metres.
    const sx = (m) => (m - camX) * ZOOM + cw / 2;
    const sy = (m) => (camY - m) * ZOOM + ch / 2;
    const left = camX - cw / 2 / ZOOM, right = camX + cw / 2 / ZOOM;
    const bottom = camY - ch / 2 / ZOOM, top = camY + ch / 2 / ZOOM;
    const tiled = this.sprites.sets.length > 0;

    // Terrain, from chunks painted once (terrainChunk) and copied every frame.
    g.imageSmoothingEnabled = false;
    for (let cx = Math.floor(left / CHUNK_M); cx <= Math.floor(right / CHUNK_M); cx++) {
      for (let cy = Math.floor(bottom / CHUNK_M); cy <= Math.floor(top / CHUNK_M); cy++) {
        const chunk = this.terrainChunk(cx, cy);
        if (chunk) g.drawImage(chunk, Math.round(sx(cx * CHUNK_M)), Math.round(sy((cy + 1) * CHUNK_M)));
      }
    }

    // Props (and, without sprites, their colliders) of the buckets in view, into the
    // depth-sorted list.
    const depth = []; // [screen y of the feet, draw function]
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
          const x = sx(p[i + 1] / 100), y = sy(p[i + 2] / 100);
          if (x < -200 || y < -50 || x > cw + 200 || y > ch + 300) continue;
          depth.push([y, () => this.prop(x, y, w.propKinds[p[i]], p[i + 3])]);
        }
        if (!tiled) for (const i of b[1]) collider(i);
      }
    }

    for (const pt of w.portals) {
      const x = sx(pt.x / 100), y = sy(pt.y / 100), r = pt.radius / 100 * ZOOM;
      if (x < -r - 100 || y < -r - 100 || x > cw + r + 100 || y > ch + r + 100) continue;
      g.fillStyle = "rgba(150, 80, 220, 0.25)";
      g.strokeStyle = "rgba(240, 220, 255, 0.7)";
      g.lineWidth = 2;
      g.beginPath();
      g.arc(x, y, r, 0, Math.PI * 2);
      g.fill();
      g.stroke();
      depth.push([y, () => {
        const h = this.sprite("portal", "", x, y, 1);
        this.label(x, y - Math.max(h, r) - 8, `→ ${pt.target}`, "#f0dcff");
      }]);
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
    const seen = new Set();
    for (const e of others) {
      const x = sx(e.x / QUANTA), y = sy(e.y / QUANTA);
      if (e.kind === KIND_ZONE || x < -40 || y < -40 || x > cw + 40 || y > ch + 80) continue;
      if (e.kind === KIND_ITEM) { this.item(x, y, e, marks); continue; }
      seen.add(e.id);
      const dir = this.move(e.id, e.x, e.y, now);
      depth.push([y, () => {
        let h;
        if (e.kind === 2) h = this.npc(x, y, r, e, dir, now);
        else if (e.kind === KIND_PLAYER) h = this.character("player", x, y, dir, now, false);
        else { this.body(x, y, r, OTHER_KIND, false); h = r; }
        if (e.kind === KIND_PLAYER) this.flags(x, y, r, e.state);
        if (e.name) this.label(x, y - h - 5, e.name, "#e8f1ff");
      }]);
    }
    for (const id of this.motion.keys()) if (id !== "self" && !seen.has(id)) this.motion.delete(id);
    if (self) {
      const x = sx(self.x / QUANTA), y = sy(self.y / QUANTA);
      const dir = this.move("self", self.x, self.y, now);
      depth.push([y + 0.5, () => {
        const h = this.character("player", x, y, dir, now, true);
        this.flags(x, y, r + 1, marks.selfState || 0);
        if (marks.selfName) this.label(x, y - h - 6, marks.selfName, "#ffe58a");
      }]);
    }
    depth.sort((a, b) => a[0] - b[0]);
    for (const [, f] of depth) f();
    g.imageSmoothingEnabled = true;
    this.minimap(self || camera, others);
    this.frames++;
  }

  // minimap draws the whole map in the top right corner: the biome colours, the
  // portals, other players and the player, and the part of the map on screen.
  minimap(me, others) {
    const g = this.ctx, w = this.world, t = w.terrain, cw = this.canvas.width, ch = this.canvas.height;
    const side = Math.min(MINIMAP_PX, Math.floor(Math.min(cw, ch) / 4));
    if (side < 40) return;
    const k = side / Math.max(w.width, w.height); // px per centimetre
    const mw = w.width * k, mh = w.height * k, x0 = cw - mw - 10, y0 = 48;
    const mx = (cm) => x0 + cm * k, my = (cm) => y0 + mh - cm * k;
    g.fillStyle = "rgba(0, 0, 0, 0.55)";
    g.fillRect(x0 - 3, y0 - 3, mw + 6, mh + 6);
    g.drawImage(this.static, x0, y0, mw, mh);
    const view = (cmX, cmY, r, colour) => {
      g.fillStyle = colour;
      g.fillRect(Math.round(mx(cmX) - r), Math.round(my(cmY) - r), 2 * r, 2 * r);
    };
    for (const pt of w.portals) view(pt.x, pt.y, 2, "#c77dff");
    for (const e of others) if (e.kind === KIND_PLAYER) view(e.x * 100 / QUANTA, e.y * 100 / QUANTA, 1.5, "#8fd3ff");
    if (me) {
      const cx = me.x * 100 / QUANTA, cy = me.y * 100 / QUANTA;
      g.strokeStyle = "rgba(255, 255, 255, 0.8)";
      g.lineWidth = 1;
      g.strokeRect(Math.round(mx(cx - cw / 2 / ZOOM * 100)) + 0.5, Math.round(my(cy + ch / 2 / ZOOM * 100)) + 0.5,
        Math.max(2, cw / ZOOM * 100 * k), Math.max(2, ch / ZOOM * 100 * k));
      view(cx, cy, 2, "#ffd23f");
    }
    g.strokeStyle = "rgba(255, 255, 255, 0.35)";
    g.strokeRect(x0 - 0.5, y0 - 0.5, mw + 1, mh + 1);
  }

  // terrainChunk returns the canvas of the CHUNK_M square of terrain whose south-west
  // corner is (cx, cy)·CHUNK_M, at ZOOM: each cell filled with its biome's tile,
  // anchored to the world so the texture runs on across chunks, then the biome colours
  // (one pixel per cell, scaled up smoothly: the transitions between biomes and the
  // relief) over them. A chunk is kept once every tile it needs was loaded; the last
  // CHUNKS_KEPT are kept. Null outside the map.
  terrainChunk(cx, cy) {
    const w = this.world, t = w.terrain, cell = t.cellSize / 100;
    if (cx < 0 || cy < 0 || cx * CHUNK_M >= t.cols * cell || cy * CHUNK_M >= t.rows * cell) return null;
    const key = cx * 65536 + cy;
    let chunk = this.chunks.get(key);
    if (chunk) {
      this.chunks.delete(key); // most recently used last
      this.chunks.set(key, chunk);
      return chunk;
    }
    const px = CHUNK_M * ZOOM;
    chunk = this.spare || document.createElement("canvas");
    this.spare = null;
    chunk.width = px;
    chunk.height = px;
    const g = chunk.getContext("2d");
    const lx = (m) => (m - cx * CHUNK_M) * ZOOM, ly = (m) => ((cy + 1) * CHUNK_M - m) * ZOOM;
    const c0 = Math.floor(cx * CHUNK_M / cell), c1 = Math.min(t.cols - 1, Math.ceil((cx + 1) * CHUNK_M / cell) - 1);
    const r0 = Math.floor(cy * CHUNK_M / cell), r1 = Math.min(t.rows - 1, Math.ceil((cy + 1) * CHUNK_M / cell) - 1);
    const tiled = this.sprites.sets.length > 0;
    let complete = true;
    const patterns = new Map();
    g.imageSmoothingEnabled = false;
    if (tiled) {
      for (let row = r0; row <= r1; row++) {
        for (let col = c0; col <= c1;) {
          const b = t.biomes[row * t.cols + col];
          let end = col + 1; // one rectangle for a run of cells of one biome
          while (end <= c1 && t.biomes[row * t.cols + end] === b) end++;
          let pat = patterns.get(b);
          if (pat === undefined) {
            pat = this.pattern(g, b, lx(0), ly(0));
            patterns.set(b, pat);
          }
          if (pat) {
            g.fillStyle = pat;
            const x = Math.floor(lx(col * cell)), y = Math.floor(ly((row + 1) * cell));
            g.fillRect(x, y, Math.ceil(lx(end * cell)) - x, Math.ceil(ly(row * cell)) - y);
          } else complete = false;
          col = end;
        }
      }
    }
    g.imageSmoothingEnabled = true;
    g.globalAlpha = tiled ? TERRAIN_TINT : 1;
    const a0 = Math.max(0, c0 - 1), a1 = Math.min(t.cols - 1, c1 + 1);
    const b0 = Math.max(0, r0 - 1), b1 = Math.min(t.rows - 1, r1 + 1);
    g.drawImage(this.static, a0, t.rows - 1 - b1, a1 - a0 + 1, b1 - b0 + 1,
      lx(a0 * cell), ly((b1 + 1) * cell), (a1 - a0 + 1) * cell * ZOOM, (b1 - b0 + 1) * cell * ZOOM);
    g.globalAlpha = 1;
    if (!complete) { this.spare = chunk; return chunk; } // painted again next frame
    this.chunks.set(key, chunk);
    if (this.chunks.size > CHUNKS_KEPT) {
      const oldest = this.chunks.keys().next().value;
      this.spare = this.chunks.get(oldest);
      this.chunks.delete(oldest);
    }
    return chunk;
  }

  // pattern returns a pattern of biome b's tile for context g, placed so that the
  // world's origin is at (ox, oy) of g; the placeholder's when no set has the tile, and
  // null while it loads (or with no set at all: the biome colours alone).
  pattern(g, b, ox, oy) {
    const name = BIOME_NAMES[b];
    const s = this.sprites.find("terrain", name);
    let img = s && s.img, px, metres;
    if (img) {
      px = img.width; metres = s.spec.metres;
    } else {
      img = !s && this.sprites.placeholder();
      if (!img) return null;
      px = img.width; metres = 2;
    }
    const pat = g.createPattern(img, "repeat");
    const k = metres * ZOOM / px;
    pat.setTransform(new DOMMatrix([k, 0, 0, k, ox, oy]));
    return pat;
  }

  // sprite draws the sprite section/name standing at (x, y) at scale (1 = as the set
  // says) and returns its height on screen; the placeholder when no set has it, and a
  // marker while it loads.
  sprite(section, name, x, y, scale) {
    const g = this.ctx;
    const s = this.sprites.find(section, name);
    if (s && s.img) {
      const k = ZOOM / s.spec.pixelsPerMetre * scale;
      const [ax, ay] = s.spec.anchor;
      g.drawImage(s.img, Math.round(x - ax * k), Math.round(y - ay * k), s.img.width * k, s.img.height * k);
      return (ay + 1) * k;
    }
    const ph = !s && this.sprites.placeholder();
    if (ph) {
      g.drawImage(ph, Math.round(x - 8), Math.round(y - 16), 16, 16);
    } else {
      g.fillStyle = s ? "rgba(255, 255, 255, 0.35)" : "#ff00ff";
      g.fillRect(Math.round(x - 6), Math.round(y - 12), 12, 12);
    }
    return 16;
  }

  // prop draws a prop of kind (the world's propKinds entry) at scale permille.
  prop(x, y, kind, scale) {
    this.sprite("props", kind ? kind.name : "", x, y, (scale || 1000) / 1000);
  }

  // move records where entity id is and returns {dir, moving}: the direction of its
  // last movement (north is up) and whether it moved within MOVING_MS.
  move(id, qx, qy, now) {
    let m = this.motion.get(id);
    if (!m) {
      m = { x: qx, y: qy, dir: "south", at: -Infinity };
      this.motion.set(id, m);
    }
    const dx = qx - m.x, dy = qy - m.y;
    if (Math.abs(dx) + Math.abs(dy) > 0.05) {
      m.dir = Math.abs(dx) > Math.abs(dy) ? (dx > 0 ? "east" : "west") : (dy > 0 ? "north" : "south");
      m.at = now;
    }
    m.x = qx; m.y = qy;
    return { dir: m.dir, moving: now - m.at < MOVING_MS };
  }

  // character draws a character of kind standing at (x, y), walking or standing as
  // motion says, with a shadow (and a ring when it is the player's own); it returns its
  // height on screen.
  character(kind, x, y, motion, now, own) {
    const g = this.ctx;
    g.fillStyle = "rgba(0, 0, 0, 0.3)";
    g.beginPath();
    g.ellipse(x, y, 7, 3, 0, 0, Math.PI * 2);
    g.fill();
    if (own) {
      g.strokeStyle = "#ffd23f";
      g.lineWidth = 2;
      g.beginPath();
      g.ellipse(x, y, 10, 4.5, 0, 0, Math.PI * 2);
      g.stroke();
    }
    const s = this.sprites.find("characters", kind);
    if (!s || !s.img) return this.sprite("characters", kind, x, y, 1);
    const spec = s.spec, anims = spec.animations || {};
    const a = (motion.moving && anims[`walk-${motion.dir}`]) || anims[`idle-${motion.dir}`] || anims.idle;
    const frames = (a && a.frames) || [0];
    const f = frames[Math.floor(now * ((a && a.fps) || 1) / 1000) % frames.length];
    const [fw, fh] = spec.frame, cols = Math.max(1, Math.floor(s.img.width / fw));
    const k = ZOOM / spec.pixelsPerMetre;
    const [ax, ay] = spec.anchor;
    g.drawImage(s.img, (f % cols) * fw, Math.floor(f / cols) * fh, fw, fh,
      Math.round(x - ax * k), Math.round(y - ay * k), fw * k, fh * k);
    return (ay + 1) * k;
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

  // item draws an item: its template's icon (the placeholder when no set has one),
  // faded with a dashed ring while its change of owner is pending, ringed when E would
  // take it.
  item(x, y, e, marks) {
    const g = this.ctx, t = this.templates[e.template - 1];
    const pending = (e.state & 1) || (marks.pending && marks.pending.has(e.id));
    const h = 9;
    g.globalAlpha = pending ? 0.45 : 1;
    const s = this.sprites.find("items", t ? t.id : "");
    if (s && s.img) {
      g.drawImage(s.img, Math.round(x - h), Math.round(y - h), 2 * h, 2 * h);
    } else if (!s && this.sprites.placeholder()) {
      g.drawImage(this.sprites.placeholder(), Math.round(x - h), Math.round(y - h), 2 * h, 2 * h);
    } else {
      g.fillStyle = itemColour(t ? t.id : e.template);
      g.fillRect(x - h, y - h, 2 * h, 2 * h);
      g.fillStyle = "#111";
      g.font = "bold 9px system-ui, sans-serif";
      g.textAlign = "center";
      g.textBaseline = "middle";
      g.fillText(itemGlyph(t), x, y + 0.5);
      g.textBaseline = "alphabetic";
    }
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

  // npc draws an NPC walking or standing, ringed at its feet in the colour of its
  // perception state, with its sign above; it returns its height on screen.
  npc(x, y, r, e, motion, now) {
    const st = NPC_STYLES[e.state] || NPC_STYLES[0];
    const g = this.ctx;
    g.strokeStyle = st.fill;
    g.lineWidth = 2;
    g.beginPath();
    g.ellipse(x, y, 10, 4.5, 0, 0, Math.PI * 2);
    g.stroke();
    const h = this.character("npc", x, y, motion, now, false);
    if (st.sign) {
      g.font = "bold 13px system-ui, sans-serif";
      g.textAlign = "center";
      g.fillStyle = st.fill;
      g.strokeStyle = "#000";
      g.lineWidth = 3;
      g.strokeText(st.sign, x, y - h - 18);
      g.fillText(st.sign, x, y - h - 18);
    }
    return h;
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
