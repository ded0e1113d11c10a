// What the page says to players. The servers answer with stable codes and messages for
// developers; a player reads these sentences instead, so that no id, store error or
// close code ever reaches the screen. A code without a sentence here shows the map's
// message (docs/netcode.md: the map writes refusals for players too).

// GUEST_ITEMS is what a guest reads wherever items could be taken.
export const GUEST_ITEMS = "Guests cannot keep items. Sign in (Play) to keep what you find.";

// Refusals of commands (items, equipment, trades) by their code.
const REFUSALS = {
  guest_no_items: GUEST_ITEMS,
  item_not_found: "That item is gone.",
  item_pending: "Someone is taking that item right now.",
  out_of_reach: "That is out of reach: walk closer.",
  inventory_full: "Your inventory is full.",
  too_heavy: "That is too heavy to carry with what you already have.",
  item_quantity: "Only a whole stack can change hands.",
  item_not_consumable: "That cannot be used.",
  item_wrong_place: "That item is no longer where it was.",
  item_cooldown: "That item is not back yet.",
  trade_absent: "That player is not here any more.",
  trade_not_found: "That offer is no longer open.",
  trade_pending: "That trade is already being completed.",
  trade_expired: "The offer expired.",
  trade_withdrawn: "The offer was withdrawn.",
  illegal_slot: "That does not go there.",
  equip_locked: "Wait a moment before changing that again.",
  skill_gate: "You lack the skill for that yet.",
  conflict: "Someone this involves has moved on; nothing changed hands. Try again.",
  forbidden: "This character is now played elsewhere.",
  map_unavailable: "The server could not confirm that just now; nothing changed hands. Try again.",
  rate_limited: "Slow down a little.",
  lost: "The connection dropped before the server answered; nothing changed hands.",
  internal: "The server could not do that; nothing changed hands.",
};

// refusal is the sentence for a refused command's error {code, message}.
export function refusal(err) {
  if (!err) return "";
  return REFUSALS[err.code] || err.message || "The server refused that.";
}

// Why the page is reconnecting, by the code a join or hello was refused with.
const JOIN_TROUBLE = {
  bad_request: "the server did not understand the request",
  unauthorized: "the server did not accept this browser's key",
  forbidden: "that character belongs to another key",
  map_unavailable: "the map is starting",
  map_quarantined: "this map is closed for repairs",
  unavailable: "the server does not answer",
  capacity: "the server is full",
  rate_limited: "too many attempts, waiting a moment",
  ticket_invalid: "joining again",
  ticket_expired: "joining again",
  ticket_used: "joining again",
  wrong_map: "joining again",
};

// closed says why a game connection ended, from its close event.
export function closed(ev) {
  switch (ev && ev.code) {
    case 1001: case 1012: return "the server is restarting";
    case 1011: return "the server had a problem";
    case 1013: return "the map is busy";
    case 4001: return "the map went away, joining again"; // the edge's public.CloseMapGone
    default: return "the connection dropped";
  }
}

// trouble turns a reconnecting detail into words: a close already said for people, or
// "code: message" of a refused join, named by its code.
export function trouble(detail) {
  const m = /^([a-z_]+): /.exec(detail || "");
  if (!m) return detail || "";
  return JOIN_TROUBLE[m[1]] || REFUSALS[m[1]] || "the server refused to let us in";
}

// status is the status line for a connection state and its detail.
export function status(state, detail, where) {
  switch (state) {
    case "playing": return `Playing${where ? " on " + where : ""}`;
    case "joining": return "Joining…";
    case "connecting": return "Connecting…";
    case "transferring": return "Through the portal…";
    case "reconnecting": return `Reconnecting: ${trouble(detail) || "the connection dropped"}…`;
    case "stopped": return detail ? `Stopped: ${detail}` : "Stopped";
    case "error": return `Cannot play: ${trouble(detail) || detail}`;
    default: return detail ? `${state}: ${detail}` : state;
  }
}
