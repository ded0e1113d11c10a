// The game's panels around the canvas, following the item and equipment protocol
// (docs/netcode.md, Items): the inventory with its weight, limit and speed, and per item
// equip/unequip, drop, use and offer buttons; a trade offer made to the player, with
// accept and decline; the pickup key (E) on the nearest item in reach, shown pending
// until the server confirms; and every item event and answer as a line of the log.

const $ = (id) => document.getElementById(id);

// REACH_QUANTA is how far from the player's centre an item may lie to be picked up (the
// map's game.Reach: 2 units of 16 quanta); the map decides, the page only aims.
const REACH_QUANTA = 32;
const KIND_ITEM = 3;
const ITEM_PENDING = 1; // bit 0 of an item entity's state
// NPC perception states (format 2's state of kind 2).
export const NPC_STATES = ["idle", "suspicious", "alert", "chasing"];

const SLOT_NAMES = { head: "head", body: "body", main_hand: "main hand", off_hand: "off hand" };

export class Hud {
  // session is the Session; log(text, kind) writes a line of the event log.
  constructor(session, log) {
    this.session = session;
    this.log = log;
    this.templates = session.wasm.itemTemplates || [];
    this.byId = new Map(this.templates.map((t) => [t.id, t]));
    this.picking = new Map(); // item entity id -> seq of its pickup, until answered
    this.offer = null;        // the trade offer shown (trade_offered data)
    this.lastPick = null;     // {itemId, seq, sentAt, answeredAt, code}: the last pickup, for the overlay and tests
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
  // taking, with its item id, or null.
  pickable() {
    const me = this.session.predicted;
    if (!me) return null;
    let best = null, bestD = Infinity;
    for (const e of this.session.latest().values()) {
      if (e.kind !== KIND_ITEM || (e.state & ITEM_PENDING) || this.picking.has(e.id)) continue;
      const d = Math.hypot(e.x - me.x, e.y - me.y);
      if (d <= REACH_QUANTA && d < bestD) { best = e; bestD = d; }
    }
    return best && { entity: best, itemId: this.session.itemIdOf(best) };
  }

  // pickup sends a pickup of the nearest item in reach (the E key).
  pickup() {
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
      if (err) this.log(`pickup refused: ${err.code}${err.message ? " (" + err.message + ")" : ""}`, "error");
      return;
    }
    const what = `${cmd.feature === "equipment" ? "" : "items "}${cmd.action}`;
    if (err) this.log(`${what} refused: ${err.code}${err.message ? " (" + err.message + ")" : ""}`, "error");
    else if (cmd.feature === "equipment") this.log(`${cmd.action} ${cmd.payload.slot ? SLOT_NAMES[cmd.payload.slot] || cmd.payload.slot : ""}: done`);
  }

  // event shows one event of the game.
  event(msg) {
    const d = msg.data || {};
    const me = this.session.welcome && this.session.welcome.characterId;
    const who = (id) => (id === me ? "you" : id);
    switch (msg.name) {
      case "inventory": this.render(); break;
      case "item_picked": this.log(`${who(d.characterId)} picked up ${this.nameOf(d.templateId, d.quantity)}`); break;
      case "item_dropped": this.log(`${who(d.characterId)} dropped ${this.nameOf(d.templateId, d.quantity)}`); break;
      case "item_consumed": this.log(`${who(d.characterId)} used ${this.nameOf(d.templateId, 1)}`); break;
      case "item_recovered": this.log(`${this.nameOf(d.templateId, 1)} was recovered (${d.trigger})`); break;
      case "trade_offered":
        if (d.toCharacterId === me) this.showOffer(d);
        this.log(d.fromCharacterId === me ? `you offer ${this.nameOf(d.templateId, d.quantity)} to ${d.toCharacterId}` :
          `${who(d.fromCharacterId)} offers ${this.nameOf(d.templateId, d.quantity)}`);
        break;
      case "item_traded":
        if (this.offer && this.offer.tradeId === d.tradeId) this.showOffer(null);
        this.log(`${who(d.fromCharacterId)} gave ${this.nameOf(d.templateId, d.quantity)} to ${who(d.toCharacterId)}`);
        break;
      case "trade_declined":
        if (this.offer && this.offer.tradeId === d.tradeId) this.showOffer(null);
        this.log(`trade ${d.code === "expired" || d.code === "trade_expired" ? "expired" : "declined"}${d.code ? " (" + d.code + ")" : ""}`);
        break;
      case "equip_result":
        if (d.success) this.log(`${d.operation} ${SLOT_NAMES[d.slot] || d.slot || ""}: done`);
        else this.log(`${d.operation} ${SLOT_NAMES[d.slot] || d.slot || ""} refused: ${d.code}${d.message ? " (" + d.message + ")" : ""}`, "error");
        break;
      case "npc_state": // only about the player: every NPC's state shows on the canvas anyway
        if (d.target && d.target === this.session.selfId) this.log(`an NPC is ${d.to} about you`);
        break;
    }
  }

  showOffer(d) {
    this.offer = d;
    $("trade").hidden = !d;
    if (d) $("trade-text").textContent = `${d.fromCharacterId} offers you ${this.nameOf(d.templateId, d.quantity)}`;
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
      if (worn) button("Unequip", "unequip", () => this.session.command("equipment", "unequip", { slot: e.compartment }));
      else if (t.slot) button("Equip", "equip", () => this.session.command("equipment", "equip", { itemId: e.itemId, slot: t.slot }));
      if (t.consumable) button("Use", "consume", () => this.session.command("items", "consume", { itemId: e.itemId }));
      button("Drop", "drop", () => this.session.command("items", "drop", { itemId: e.itemId }));
      button("Offer", "offer", () => {
        const to = $("trade-to").value.trim();
        if (!to) { this.log("offer: type the character id to offer to", "error"); return; }
        this.session.command("items", "offer", { toCharacterId: to, itemId: e.itemId });
      });
      list.appendChild(row);
    }
    $("inventory-empty").hidden = !!(inv && inv.entries && inv.entries.length);
    $("self-id").textContent = (this.session.welcome && this.session.welcome.characterId) || "";
  }
}

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
