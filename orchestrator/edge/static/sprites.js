// The asset sets a map names (its MapConfig's assetSets, docs/assets.md), as the page
// draws with them: each set's manifest from the edge, its images loaded once (their
// URLs are content hashes, cached for a year), and lookups that fall back from the
// first set to the next and, when none has the sprite, to the placeholder. A set the
// edge lacks is listed in missing, so the page can say which.

export const DEFAULT_SETS = [{ id: "mapyard-default", version: "1" }];

export class Sprites {
  constructor() {
    this.sets = [];      // loaded manifests, first one first
    this.missing = [];   // "id@version" of sets the edge did not have
    this.images = new Map(); // url → HTMLImageElement
    this.key = "";
  }

  // load fetches the manifests of refs (a MapConfig's assetSets; the default set when
  // empty) unless they are the ones loaded already; it never throws.
  async load(refs) {
    refs = refs && refs.length ? refs : DEFAULT_SETS;
    const key = refs.map((r) => `${r.id}@${r.version}`).join(",");
    if (key === this.key) return;
    this.key = key;
    const sets = [], missing = [];
    for (const r of refs) {
      try {
        const resp = await fetch(`/assets/sets/${encodeURIComponent(r.id)}/${encodeURIComponent(r.version)}/manifest.json`);
        if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
        const m = await resp.json();
        m.urls = new Map((m.files || []).map((f) => [f.path, f.url]));
        sets.push(m);
      } catch (err) {
        missing.push(`${r.id}@${r.version}`);
      }
    }
    if (this.key !== key) return; // a newer load started meanwhile
    this.sets = sets;
    this.missing = missing;
    // Load the images now, so the first frames have them.
    for (const m of sets) for (const url of m.urls.values()) this.image(url);
  }

  // image returns the loaded image at url, or null while it loads (or failed).
  image(url) {
    let img = this.images.get(url);
    if (!img) {
      img = new Image();
      img.decoding = "async";
      img.src = url;
      this.images.set(url, img);
    }
    return img.complete && img.naturalWidth > 0 ? img : null;
  }

  // find returns {img, spec} for the first set whose section (terrain, props, items,
  // characters, ui) has name, or for "portal"; img is null while it loads.
  find(section, name) {
    for (const m of this.sets) {
      const spec = section === "portal" ? m.portal : m[section] && m[section][name];
      if (!spec) continue;
      const url = m.urls.get(spec.file);
      if (url) return { img: this.image(url), spec };
    }
    return null;
  }

  // placeholder returns the placeholder image of the first set that has one, or null.
  placeholder() {
    const p = this.find("ui", "placeholder");
    return p && p.img;
  }
}
