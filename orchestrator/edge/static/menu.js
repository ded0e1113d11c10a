// The start menu: who plays. "Play" continues the key's selected character (a new key
// gets a default one), "Play as guest" plays a disposable character, and the list below
// lets the key pick, create or delete its characters through the character API
// (docs/characters.md), with the key as its bearer token.

const $ = (id) => document.getElementById(id);

// api calls the character API with the key; it returns the decoded answer (null for
// 204) or throws an Error carrying the server's code and message.
async function api(key, method, path, body) {
  const init = { method, headers: { Authorization: `Bearer ${key}` } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let r;
  try {
    r = await fetch(`/api/v1/characters${path}`, init);
  } catch (err) {
    throw Object.assign(new Error(`the server does not answer (${err.message || err})`), { code: "unavailable" });
  }
  if (r.status === 204) return null;
  let answer = null;
  try { answer = await r.json(); } catch { /* not JSON */ }
  if (!r.ok) {
    const e = (answer && answer.error) || { code: "internal", message: `HTTP ${r.status}` };
    throw Object.assign(new Error(e.message), { code: e.code });
  }
  return answer;
}

// Menu shows the start menu and calls onPlay(identity) with {authKey, characterId?}
// or {} (a guest) when the player picks.
export class Menu {
  // authKey() returns the browser's key, creating it on first use; hasKey() tells
  // whether one is stored already (the list is only fetched for a stored key).
  constructor(authKey, hasKey, onPlay) {
    this.authKey = authKey;
    this.hasKey = hasKey;
    this.onPlay = onPlay;
    this.characters = [];
    $("play").onclick = () => this.play({ authKey: this.authKey() });
    $("guest").onclick = () => this.play({});
    $("create").onsubmit = (e) => { e.preventDefault(); this.create(); };
  }

  // show opens the menu and loads the key's characters.
  show() {
    $("menu").hidden = false;
    $("identity").textContent = this.hasKey() ? "Play continues this browser's selected character." :
      "Play creates this browser's first character.";
    this.error("");
    $("play").focus();
    if (this.hasKey()) this.refresh();
    else this.render();
  }

  play(identity) {
    $("menu").hidden = true;
    this.onPlay(identity);
  }

  error(text) {
    $("menu-error").textContent = text;
    $("menu-error").hidden = !text;
  }

  // refresh fetches the key's characters and draws the list.
  async refresh() {
    try {
      const list = await api(this.authKey(), "GET", "");
      this.characters = list.characters || [];
      this.render();
    } catch (err) {
      this.error(`characters: ${err.code}: ${err.message}`);
    }
  }

  // render draws one row per character: its name, where it was last saved, Play and
  // Delete (which asks once more before it deletes).
  render() {
    const box = $("characters");
    box.replaceChildren();
    for (const c of this.characters) {
      const row = document.createElement("li");
      row.dataset.characterId = c.characterId;
      const name = document.createElement("span");
      name.className = "name";
      name.textContent = c.name + (c.selected ? " ★" : "");
      const where = document.createElement("span");
      where.className = "hint";
      where.textContent = c.mapId || "new";
      const pick = document.createElement("button");
      pick.type = "button";
      pick.className = "pick";
      pick.textContent = "Play";
      pick.onclick = () => this.pick(c);
      const del = document.createElement("button");
      del.type = "button";
      del.className = "delete";
      del.textContent = "Delete";
      del.onclick = () => {
        if (del.dataset.armed) this.remove(c);
        else { del.dataset.armed = "1"; del.textContent = "Sure?"; }
      };
      row.append(name, where, pick, del);
      box.appendChild(row);
    }
  }

  // pick selects c (so Play and later visits continue it) and plays it.
  async pick(c) {
    try {
      await api(this.authKey(), "POST", `/${encodeURIComponent(c.characterId)}/select`);
    } catch (err) {
      this.error(`select ${c.name}: ${err.code}: ${err.message}`);
      return;
    }
    this.play({ authKey: this.authKey(), joinExtra: { characterId: c.characterId } });
  }

  async create() {
    const input = $("new-name");
    const name = input.value.trim();
    try {
      await api(this.authKey(), "POST", "", { name });
      input.value = "";
      this.error("");
      await this.refresh();
    } catch (err) {
      this.error(`create: ${err.code}: ${err.message}`);
    }
  }

  async remove(c) {
    try {
      await api(this.authKey(), "DELETE", `/${encodeURIComponent(c.characterId)}`);
      this.error("");
    } catch (err) {
      this.error(err.code === "character_in_play" ?
        `${c.name} is still in play; it can be deleted about half a minute after it left` :
        `delete ${c.name}: ${err.code}: ${err.message}`);
    }
    await this.refresh();
  }
}
