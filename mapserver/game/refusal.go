package game

import (
	"strings"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// What a player reads when a command that changes an owner is refused. The item rules
// and the orchestrator explain their refusals to the map's developer and operator
// (item ids, places, character ids, store errors); a player gets a code it can act on
// and one of these sentences instead, whoever refused.
var refusalText = map[string]string{
	items.CodeNotFound:         "That item is gone.",
	items.CodeWrongPlace:       "That item is no longer where it was.",
	items.CodeTemplateMismatch: "That item is not what it seemed; nothing changed hands.",
	items.CodeQuantity:         "Only a whole stack can change hands.",
	items.CodeNotConsumable:    "That cannot be used.",
	items.CodePersistent:       "That item can never be used up.",
	items.CodeUniqueExists:     "There can be only one of those, and it exists already.",
	items.CodeCooldown:         "That item is not back yet.",
	items.CodeExists:           "That item exists already; nothing changed hands.",
	// The rest of the rules' refusals mean the map and the orchestrator disagree (a
	// defect, or a picture of the world that went stale): nothing a player can change.
	items.CodeMalformed:       cannot,
	items.CodeIllegalMove:     cannot,
	items.CodeUnknownTemplate: cannot,
	items.CodeNoPolicy:        cannot,
	items.CodeNotAnchor:       cannot,
	items.CodeNotRecoverable:  cannot,
	items.CodeCriticalSeed:    cannot,
	items.CodeHolderActive:    cannot,
	wire.CodeGuestNoItems:     "Guests cannot keep items: a character of your own can.",
	apierr.ECONFLICT:          "Someone this involves has moved on; nothing changed hands. Try again.",
	apierr.EFORBIDDEN:         "This character is now played elsewhere; nothing changed hands.",
	apierr.EMAPUNAVAILABLE:    "The server could not confirm that just now; nothing changed hands. Try again.",
	apierr.EINTERNAL:          cannot,
}

// cannot is the sentence of a refusal the player can do nothing about.
const cannot = "The server could not do that; nothing changed hands."

// ruleRefusal gives a refusal of the item rules, which the game runs itself before it
// sends an event (beginItem), the sentence players read; any other refusal (the
// game's own, written for players already) is returned as it is.
func ruleRefusal(err error) error {
	code := apierr.Code(err)
	if text, ok := refusalText[code]; ok && strings.HasPrefix(code, items.CodePrefix) {
		return apierr.Errorf(code, "%s", text)
	}
	return err
}

// orchestratorRefusal turns the refusal of a critical event (the orchestrator's, or the
// kit's before sending it) into what the player is answered: the orchestrator's words
// and ids never reach a player (the kit logs them for the operator). The item rules'
// codes stay, with a sentence for players; the lease refusals (conflict, forbidden)
// and map_unavailable too. not_found means that a character the event gives an item to
// is not a saved character, the only holder the orchestrator keeps items for:
// guest_no_items. Anything else (a malformed event, a store error) is the map's or the
// host's fault, which the player cannot act on: internal.
func orchestratorRefusal(answer error) error {
	code := apierr.Code(answer)
	switch {
	case code == apierr.ENOTFOUND:
		code = wire.CodeGuestNoItems
	case code == apierr.EUNAVAILABLE || code == apierr.ERATELIMITED:
		code = apierr.EMAPUNAVAILABLE
	}
	text, ok := refusalText[code]
	if !ok {
		code, text = apierr.EINTERNAL, refusalText[apierr.EINTERNAL]
	}
	return apierr.Errorf(code, "%s", text)
}
