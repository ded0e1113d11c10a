// The game's panels around the canvas, following the item and equipment protocol
// (docs/netcode.md, Items): the inventory with its weight, limit and speed, and per item
// equip/unequip, drop, use and offer buttons; a trade offer made to the player, with
// accept and decline; the pickup key (E) on the nearest item in reach, shown pending
// until the server confirms; and every item event and answer as a line of the log,
// in words for players, with players called by their names. A guest cannot keep items
// (the orchestrator keeps them for saved characters only): it is not offered E or an
// offer's Accept, and is told to sign in instead.

import { GUEST_ITEMS, refusal } from "./words.js";

const $ = (id) => document.getElementById(id);

// REACH_QUANTA is how far from the player's centre an item may lie to be picked up (the
// map's game.Reach: 2 units of 16 quanta); the map decides, the page only aims.
const REACH_QUANTA = 32;
const KIND_ITEM = 3;
const ITEM_PENDING = 1; // bit 0 of an item entity's state
// NPC perception states (format 2's state of kind 2).
export const NPC_STATES = ["idle", "suspicious", "alert", "chasing"];

const SLOT_NAMES = { head: "head", body: "body", main_hand: "main hand", off_hand: "off hand" };
// An NPC chasing the player is told once per NPC in this long; its other changes of
// mind show on the canvas only.
const CHASE_NOTE_MS = 20000;

export class Hud {
  // session is the Session; log(text, kind) writes a line of the event log; names the
  // players' Names.
  constructor(session, log, names) {
    this.session = session;
    this.log = log;
    this.names = names;
    this.templates = session.wasm.itemTemplates || [];
    this.byId = new Map(this.templates.map((t) => [t.id, t]));
    this.picking = new Map(); // item entity id -> seq of its pickup, until answered
    this.offer = null;        // the trade offer shown (trade_offered data)
    this.lastPick = null;     // {itemId, seq, sentAt, answeredAt, code}: the last pickup, for the overlay and tests
    this.guest = !session.identity.authKey;
    this.chased = new Map();  // NPC entity id -> when its chase was last told
    $("inventory").hidden = false;
    $("trade-accept").onclick = () => this.answerOffer("accept");
    $("trade-decline").onclick = () => this.answerOffer("decline");
    this.render();
  }

  // template is the catalog entry of a template id, or a stand-in.
  template(id) { return this.byId.get(id) || { id, name: id, slot: "", consumable: false }; }

  // nameOf names an item by its template: "Iron sword", "Apple ×3".
  nameOf(templateId, quantity) {
    const t = this.template(templateId);
    return quantity > 1 ? `${t.name} ×${quantity}` : t.name;
  }

  // pickable returns the nearest item entity in reach of the player that nobody is
  // taking, with its item id, or null; always null for a guest, who cannot keep it.
  pickable() {
    const me = this.session.predicted;
    if (!me || this.guest) return null;
    let best = null, bestD = Infinity;
    for (const e of this.session.latest().values()) {
      if (e.kind !== KIND_ITEM || (e.state & ITEM_PENDING) || this.picking.has(e.id)) continue;
      const d = Math.hypot(e.x - me.x, e.y - me.y);
      if (d <= REACH_QUANTA && d < bestD) { best = e; bestD = d; }
    }
    return best && { entity: best, itemId: this.session.itemIdOf(best) };
  }

  // pickup sends a pickup of the nearest item in reach (the E key); a guest is told to
  // sign in instead.
  pickup() {
    if (this.guest) { this.log(GUEST_ITEMS); return; }
    const p = this.pickable();
    if (!p) { this.log("nothing to pick up within reach"); return; }
    const t = this.session.wasm.itemTemplates[p.entity.template - 1];
    if (!p.itemId) { this.log(`cannot name this ${t ? t.name : "item"}: it was not seen arriving`, "error"); return; }
    const seq = this.session.command("items", "pickup", { itemId: p.itemId });
    if (!seq) return;
    this.picking.set(p.entity.id, seq);
    this.lastPick = { itemId: p.itemId, seq, sentAt: performance.now(), answeredAt: 0, code: "" };
    this.log(`picking up ${t ? t.name : p.itemId}…`);
  }

  // pendingIds is the set of item entities to draw as pending: the player's own pickups
  // not yet answered, and those the server marks pending.
  pendingIds() { return new Set(this.picking.keys()); }

  // answer takes the server's answer to a command (an ack, an error, an equip_result).
  answer(cmd, err) {
    if (cmd.feature === "items" && cmd.action === "pickup") {
      for (const [id, seq] of this.picking) if (seq === cmd.seq) this.picking.delete(id);
      if (this.lastPick && this.lastPick.seq === cmd.seq) {
        this.lastPick.answeredAt = performance.now();
        this.lastPick.code = err ? err.code : "";
      }
      if (err) this.log(`Could not pick that up: ${refusal(err)}`, "error");
      return;
    }
    const slot = cmd.payload && cmd.payload.slot ? SLOT_NAMES[cmd.payload.slot] || cmd.payload.slot : "";
    if (err) this.log(`Could not ${ACTIONS[cmd.action] || cmd.action}${slot ? " (" + slot + ")" : ""}: ${refusal(err)}`, "error");
    else if (cmd.feature === "equipment") this.log(`${cmd.action === "equip" ? "Equipped" : "Took off"} ${slot || "it"}.`);
  }

  // who names a character for the log: "you", its name, or "someone" before the map
  // said its name.
  who(characterId) {
    const me = this.session.welcome && this.session.welcome.characterId;
    return characterId === me ? "you" : this.names.ofCharacter(characterId) || "someone";
  }

  // event shows one event of the game. An equipment result is told by answer (it
  // answers the command), not here again.
  event(msg) {
    const d = msg.data || {};
    const me = this.session.welcome && this.session.welcome.characterId;
    const who = (id) => this.who(id);
    switch (msg.name) {
      case "inventory": this.render(); break;
      case "item_picked": this.log(`${who(d.characterId)} picked up ${this.nameOf(d.templateId, d.quantity)}`); break;
      case "item_dropped": this.log(`${who(d.characterId)} dropped ${this.nameOf(d.templateId, d.quantity)}`); break;
      case "item_consumed": this.log(`${who(d.characterId)} used ${this.nameOf(d.templateId, 1)}`); break;
      case "item_recovered": this.log(`${this.nameOf(d.templateId, 1)} was recovered (${d.trigger})`); break;
      case "trade_offered":
        if (d.toCharacterId === me) this.showOffer(d);
        this.log(d.fromCharacterId === me ? `you offer ${this.nameOf(d.templateId, d.quantity)} to ${who(d.toCharacterId)}` :
          `${who(d.fromCharacterId)} offers ${this.nameOf(d.templateId, d.quantity)}`);
        break;
      case "item_traded":
        if (this.offer && this.offer.tradeId === d.tradeId) this.showOffer(null);
        this.log(`${who(d.fromCharacterId)} gave ${this.nameOf(d.templateId, d.quantity)} to ${who(d.toCharacterId)}`);
        break;
      case "trade_declined":
        if (this.offer && this.offer.tradeId === d.tradeId) this.showOffer(null);
        this.log(d.code ? `The trade did not happen: ${refusal({ code: d.code })}` : "The offer was declined.");
        break;
      case "npc_state": this.npc(d); break;
    }
  }

  // npc tells that an NPC started chasing the player, once per NPC in CHASE_NOTE_MS:
  // every other change of an NPC's mind shows on the canvas, and an NPC that keeps
  // hesitating must not flood the log.
  npc(d) {
    if (d.to !== "chasing" || !d.target || d.target !== this.session.selfId) return;
    const now = performance.now(), last = this.chased.get(d.id);
    if (last !== undefined && now - last < CHASE_NOTE_MS) return;
    this.chased.set(d.id, now);
    if (this.chased.size > 64) this.chased.delete(this.chased.keys().next().value);
    this.log("Something is chasing you!");
  }

  // showOffer opens (d) or closes (null) the bar of an offer made to the player; a
  // guest may only decline, and is told why.
  showOffer(d) {
    this.offer = d;
    $("trade").hidden = !d;
    $("trade-accept").hidden = this.guest;
    if (d) $("trade-text").textContent = `${this.who(d.fromCharacterId)} offers you ${this.nameOf(d.templateId, d.quantity)}` +
      (this.guest ? `. ${GUEST_ITEMS}` : "");
  }

  answerOffer(action) {
    if (!this.offer) return;
    this.session.command("items", action, { tradeId: this.offer.tradeId });
    this.showOffer(null);
  }

  // render draws the inventory panel from the newest inventory event.
  render() {
    const inv = this.session.inventory;
    const kg = (g) => (g / 1000).toFixed(1);
    const speed = inv && inv.speed ? inv.speed : this.session.wasm.playerSpeed / this.session.wasm.quantaPerUnit;
    $("inventory-head").textContent = inv ?
      `Inventory · ${kg(inv.weight || 0)} / ${kg(inv.weightLimit || 0)} kg · ${speed.toFixed(2)} u/s` : "Inventory";
    $("inventory-head").classList.toggle("heavy", !!inv && inv.weight > inv.weightLimit);
    const list = $("inventory-list");
    list.replaceChildren();
    for (const e of (inv && inv.entries) || []) {
      const t = this.template(e.templateId);
      const row = document.createElement("li");
      row.dataset.itemId = e.itemId;
      const icon = document.createElement("span");
      icon.className = "icon";
      icon.style.background = itemColour(e.templateId);
      icon.textContent = itemGlyph(t);
      const name = document.createElement("span");
      name.className = "name";
      const worn = SLOT_NAMES[e.compartment];
      name.textContent = this.nameOf(e.templateId, e.quantity) + (worn ? ` (${worn})` : "");
      row.append(icon, name);
      const button = (label, cls, fn) => {
        const b = document.createElement("button");
        b.type = "button";
        b.className = cls;
        b.textContent = label;
        b.onclick = fn;
        row.appendChild(b);
      };
      const gate = t.requires && !((inv.skills || {})[t.requires.skill] >= t.requires.level) ? t.requires : null;
      if (worn) button("Unequip", "unequip", () => this.session.command("equipment", "unequip", { slot: e.compartment }));
      else if (t.slot && !gate) button("Equip", "equip", () => this.session.command("equipment", "equip", { itemId: e.itemId, slot: t.slot }));
      else if (t.slot) {
        const note = document.createElement("span");
        note.className = "hint gate";
        note.textContent = `needs ${gate.skill} ${gate.level}`;
        row.appendChild(note);
      }
      if (t.consumable) button("Use", "consume", () => this.session.command("items", "consume", { itemId: e.itemId }));
      button("Drop", "drop", () => this.session.command("items", "drop", { itemId: e.itemId }));
      button("Offer", "offer", () => {
        const to = $("trade-to").value;
        if (!to) { this.log("Choose a player nearby to offer it to.", "error"); return; }
        this.session.command("items", "offer", { toCharacterId: to, itemId: e.itemId });
      });
      list.appendChild(row);
    }
    $("inventory-empty").hidden = !!(inv && inv.entries && inv.entries.length);
    $("inventory-empty").textContent = this.guest ? GUEST_ITEMS : "Nothing carried. E picks up the nearest item in reach.";
    $("trade-box").hidden = this.guest;
    $("self-name").textContent = this.names.self();
    this.players();
  }

  // players fills the offer's list with the players in view whose names the map told,
  // keeping the one chosen while it stays in view.
  players() {
    const select = $("trade-to"), chosen = select.value;
    const seen = [];
    for (const e of this.session.latest().values()) {
      if (e.kind !== 1 || e.id === this.session.selfId) continue;
      const n = this.names.of(e.id);
      if (n) seen.push(n);
    }
    seen.sort((a, b) => a.name.localeCompare(b.name));
    const key = seen.map((n) => n.characterId).join(" ");
    if (key === select.dataset.players) return;
    select.dataset.players = key;
    const none = new Option(seen.length ? "a player nearby…" : "nobody nearby", "");
    select.replaceChildren(none, ...seen.map((n) => new Option(n.name, n.characterId)));
    if (seen.some((n) => n.characterId === chosen)) select.value = chosen;
  }
}

// ACTIONS names commands in a refusal's sentence ("Could not drop: ...").
const ACTIONS = { equip: "equip", unequip: "take that off", drop: "drop it", consume: "use it", offer: "offer it",
  accept: "accept", decline: "decline" };

// itemColour is a template's colour: a fixed hue per template id.
export function itemColour(templateId) {
  let h = 0;
  for (const c of String(templateId)) h = (h * 31 + c.charCodeAt(0)) % 360;
  return `hsl(${h}, 70%, 55%)`;
}

// itemGlyph is a template's one-letter icon: its slot's sign for equipment, "+" for a
// consumable, else its name's first letter.
export function itemGlyph(t) {
  if (!t) return "?";
  if (t.slot === "main_hand") return "⚔";
  if (t.slot === "off_hand") return "◆";
  if (t.slot === "head" || t.slot === "body") return "▲";
  if (t.consumable) return "+";
  return (t.name || t.id || "?").charAt(0).toUpperCase();
}
