'use strict';
// Snapshot format 2 (docs/netcode.md, "Snapshot frames"), full snapshots only: every
// snapshot shows everything in view as spawns, so the map keeps no baselines and reads
// no acks. A delta would be smaller; a full snapshot is always valid, and the page and
// the Go client decode it like any other.

const FORMAT = 2;
const KIND = { player: 1, npc: 2, item: 3 };

function uvarint(out, v) {
  while (v >= 128) { out.push((v % 128) | 128); v = Math.floor(v / 128); }
  out.push(v);
}

// varint writes v zigzag-mapped (0→0, −1→1, 1→2, …).
function varint(out, v) { uvarint(out, v >= 0 ? v * 2 : -v * 2 - 1); }

// encodeFull is the full snapshot of tick for the client whose own entity is in slot
// self (-1: none) and whose last input walked is seq. entities are
// {slot, kind, id, x, y, facing, state, template}, positions in quanta, sorted by slot.
function encodeFull(tick, seq, self, entities) {
  const out = [FORMAT << 1];
  uvarint(out, tick);
  uvarint(out, seq);
  uvarint(out, self + 1);
  uvarint(out, 0); // no despawns
  uvarint(out, entities.length);
  let prev = -1;
  for (const e of entities) {
    uvarint(out, e.slot - prev - 1);
    prev = e.slot;
    out.push(e.kind);
    uvarint(out, e.id);
    varint(out, e.x);
    varint(out, e.y);
    const facing = e.facing || 0, state = e.state || 0, template = e.template || 0;
    uvarint(out, (facing ? 1 : 0) | (state ? 2 : 0) | (template ? 4 : 0));
    if (facing) out.push(facing);
    if (state) out.push(state);
    if (template) uvarint(out, template);
  }
  uvarint(out, 0); // no updates
  return Buffer.from(out);
}

module.exports = { encodeFull, KIND, FORMAT };
