// How the page draws everyone but the player: interpolated between the snapshots where
// each entity's position changed (docs/netcode.md, distant entities), a fixed delay
// behind the newest snapshot. Each function takes the Session whose snapshots, tracks
// and welcome it reads.

const TRACK_POINTS = 6; // the last position changes kept per entity for interpolation

// periodOf returns how many snapshots apart e's position changes while it moves: 1,
// or the welcome's farView.every beyond its radius or, in a crowd, beyond the
// farView.nearest nearest, where the map samples the movement of what the player sees
// from afar (docs/netcode.md). The limit is the newest snapshot's (nearLimit).
export function periodOf(s, e) {
  const fv = s.welcome && s.welcome.farView;
  if (!fv || !s.server) return 1;
  const dx = e.x - s.server.x, dy = e.y - s.server.y;
  return dx * dx + dy * dy > (s.farD2 ?? farRadius2(s, fv)) ? fv.every : 1;
}

function farRadius2(s, fv) {
  const r = fv.radius * s.wasm.quantaPerUnit;
  return r * r;
}

// nearLimit sets s.farD2, the squared distance beyond which the newest snapshot's
// entities are seen from afar: the far radius's, or nearer when more than
// farView.nearest entities stand inside it, the distance of the nearest-th (the player
// is one of them). Entities tied with it count as near; the map also keeps near what
// chases or trades with the player, which the page cannot tell, and selects the nearest
// every half second only, so an entity at the limit may move more smoothly or less
// than its period says, never wrongly placed.
function nearLimit(s, ents) {
  const fv = s.welcome && s.welcome.farView;
  s.farD2 = undefined;
  if (!fv || !s.server) return;
  const r2 = farRadius2(s, fv);
  s.farD2 = r2;
  if (!fv.nearest || ents.size <= fv.nearest) return;
  const d2s = [];
  for (const [id, e] of ents) {
    if (id === s.selfId) continue;
    const dx = e.x - s.server.x, dy = e.y - s.server.y, d2 = dx * dx + dy * dy;
    if (d2 <= r2) d2s.push(d2);
  }
  if (d2s.length < fv.nearest) return;
  d2s.sort((a, b) => a - b);
  s.farD2 = fv.nearest >= 2 ? d2s[fv.nearest - 2] : -1;
}

// recordTrack records, for every other entity, the snapshot times at which its position
// changed. A distant entity's position changes once every few snapshots, to where it
// was at that snapshot, so othersAt interpolates between these points instead of
// between snapshots. An entity that stood still before a change stood at its last
// point until one period before the change at the latest.
export function recordTrack(s, ents, time) {
  nearLimit(s, ents);
  for (const [id, e] of ents) {
    if (id === s.selfId) continue;
    const tr = s.tracks.get(id);
    if (!tr) {
      s.tracks.set(id, { points: [{ time, x: e.x, y: e.y }], extra: null });
      continue;
    }
    const last = tr.points[tr.points.length - 1];
    if (last.x === e.x && last.y === e.y) continue;
    const period = periodOf(s, e) * s.snapshotMs();
    if (time - last.time > period * 1.5) tr.points.push({ time: time - period, x: last.x, y: last.y });
    tr.points.push({ time, x: e.x, y: e.y });
    if (tr.points.length > TRACK_POINTS) tr.points.splice(0, tr.points.length - TRACK_POINTS);
  }
  for (const id of s.tracks.keys()) if (!ents.has(id)) s.tracks.delete(id);
}

// othersAt returns every other entity interpolated delayMs behind the newest snapshot.
export function othersAt(s, now, delayMs) {
  const out = [];
  if (!s.snapshots.length || s.clockOffset === null) return out;
  const t = now - s.clockOffset - delayMs;
  let a = s.snapshots[0], b = a;
  for (let i = s.snapshots.length - 1; i >= 0; i--) {
    if (s.snapshots[i].time <= t) { a = s.snapshots[i]; b = s.snapshots[i + 1] || a; break; }
  }
  const span = b.time - a.time;
  const k = span > 0 ? Math.max(0, Math.min(1, (t - a.time) / span)) : 0;
  for (const [id, eb] of b.entities) {
    if (id === s.selfId) continue;
    const tr = s.tracks.get(id);
    let x, y;
    if (tr) {
      // A distant entity is drawn one period of its own further back, so that its
      // next point has arrived; the delay eases when it crosses the radius.
      const target = (periodOf(s, eb) - 1) * s.snapshotMs();
      tr.extra = tr.extra === null ? target : tr.extra + (target - tr.extra) * 0.1;
      ({ x, y } = pointAt(tr.points, t - tr.extra));
    } else {
      const ea = a.entities.get(id) || eb;
      x = ea.x + (eb.x - ea.x) * k;
      y = ea.y + (eb.y - ea.y) * k;
    }
    out.push({ id, kind: eb.kind, x, y, facing: eb.facing, state: eb.state, template: eb.template });
  }
  return out;
}

// pointAt interpolates a track's points (sorted by time) at time t, holding the first
// before it and the last after it.
function pointAt(points, t) {
  if (t <= points[0].time) return points[0];
  for (let i = points.length - 1; i > 0; i--) {
    const p = points[i - 1], q = points[i];
    if (p.time <= t) {
      if (t >= q.time) return q;
      const k = (t - p.time) / (q.time - p.time);
      return { x: p.x + (q.x - p.x) * k, y: p.y + (q.y - p.y) * k };
    }
  }
  return points[points.length - 1];
}
