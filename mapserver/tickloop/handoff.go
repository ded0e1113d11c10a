package tickloop

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/outbox"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// movingReason is the Reason of the "moving" event a handed-over player is sent.
const movingReason = "upgrade"

// A live upgrade's handoff (POST /control/handoff, mapcontract.Handoff) runs on the
// tick in three steps:
//
//  1. The call: from then on the map admits no one (a hello or a resume is refused
//     map_unavailable, so the client's next attempt reaches the next container), and
//     every character it holds that is not already leaving is held: the game's
//     Presence Held, its commands ignored, any critical event naming it refused
//     (conflict).
//  2. The cut, at the first tick at which no critical event naming a held character
//     awaits the orchestrator's answer: at that one tick, every held character's state
//     is taken and a handoff transfer (to its own instance) is requested with it.
//     Waiting for those answers is what settles critical events before the cut: the
//     outbox sends critical events in order on one queue and transfer requests on
//     workers of their own, with no order between the two, so an event still queued
//     could reach the orchestrator after the transfer took the character's lease (and
//     be refused), and its outcome would be missing from the state the transfer
//     carries. Once it is answered, the game has settled it and the command it answers
//     has its ack or refusal on the player's connection before the "moving" event.
//  3. The answers: a granted character leaves the map. A connected player is sent the
//     "moving" event, then its connection moves (Peer.Move) with a hello carrying the
//     transfer token and the formats of the client's own hello; a connection that
//     cannot move gets the transfer message a portal sends, and is closed. A character
//     without a connection (its client awaits a resume) goes too: the transfer saved
//     its state, and its client's next join lands on the next container (a join
//     supersedes the unused transfer at the orchestrator, whose sweep ends it
//     otherwise). A refused transfer leaves the character here, playing again (Freed).
//
// The call is answered once every request of the cut is answered, or when its context
// ends (the characters not across count as remaining; when no other call waits, those
// still held for a cut that has not happened play again). A call again with the same
// generation hands over what is left; one with another generation starts over for it.

// handoff is the live upgrade the map is in; nil until the first call.
type handoff struct {
	generation         string
	moved, transferred int
	calls              []*handoffCall // answered once the cut is over
	cutDue             bool           // characters are held for a cut
	cutAfter           time.Time      // no cut before (HandoffCutDelay)
}

// handoffCall is one /control/handoff call waiting for its answer.
type handoffCall struct {
	generation string
	result     chan mapcontract.HandoffAnswer // buffered: the tick never waits
}

// Handoff hands every character over to the instance's next container, generation
// h.Generation (see the comment above handoff), and answers how many went across and
// how many are left, once all are answered or ctx ends. Error code: map_unavailable
// (the loop is stopping).
func (l *Loop) Handoff(ctx context.Context, h mapcontract.Handoff) (mapcontract.HandoffAnswer, error) {
	c := &handoffCall{generation: h.Generation, result: make(chan mapcontract.HandoffAnswer, 1)}
	stopping := apierr.Errorf(apierr.EMAPUNAVAILABLE, "the map is stopping")
	if !l.post(message{op: opHandoff, call: c}) {
		return mapcontract.HandoffAnswer{}, stopping
	}
	select {
	case a := <-c.result:
		return a, nil
	case <-l.done:
		return mapcontract.HandoffAnswer{}, stopping
	case <-ctx.Done():
	}
	// Out of time: the tick answers where the handoff stands.
	if !l.post(message{op: opHandoffEnd, call: c}) {
		return mapcontract.HandoffAnswer{}, stopping
	}
	select {
	case a := <-c.result:
		return a, nil
	case <-l.done:
		return mapcontract.HandoffAnswer{}, stopping
	}
}

// startHandoff takes a call: it refuses every new player from now on and holds every
// character that is not already leaving, for the next cut.
func (l *Loop) startHandoff(c *handoffCall) {
	h := l.handoff
	if h == nil || h.generation != c.generation {
		if h != nil {
			l.Log.Warn("handoff to another generation; the earlier one is given up", "generation", c.generation, "was", h.generation)
			l.answerHandoff()
		}
		h = &handoff{generation: c.generation}
		l.handoff = h
	}
	l.refusing.Store(true)
	h.calls = append(h.calls, c)
	if l.game == nil {
		return
	}
	for _, p := range l.chars {
		if p.transfer == "" && !p.held {
			p.held = true
			l.game.Presence(p.id, gameapi.Held)
			h.cutDue = true
			h.cutAfter = l.Now().Add(l.HandoffCutDelay)
		}
	}
	l.Log.Info("handoff called", "generation", h.generation, "characters", len(l.chars))
}

// endHandoffCall answers a call whose context ended. When no other call waits, the
// characters still held for a cut play on until the next call.
func (l *Loop) endHandoffCall(c *handoffCall) {
	h := l.handoff
	if h == nil {
		return
	}
	i := slices.Index(h.calls, c)
	if i < 0 {
		return // answered already
	}
	h.calls = slices.Delete(h.calls, i, i+1)
	if len(h.calls) == 0 && h.cutDue {
		h.cutDue = false
		for _, p := range l.chars {
			if p.held {
				p.held = false
				l.game.Presence(p.id, gameapi.Freed)
			}
		}
		l.Log.Warn("handoff call ended before the cut; the characters play on", "generation", h.generation)
	}
	c.result <- l.handoffAnswer()
}

// progressHandoff runs once a tick, after the tick's messages: it makes the cut once
// no critical event of a held character is pending, and answers the calls once no
// handoff transfer is in flight.
func (l *Loop) progressHandoff() {
	h := l.handoff
	if h == nil || len(h.calls) == 0 {
		return
	}
	if h.cutDue {
		if l.settling() || (l.HandoffCutDelay > 0 && l.Now().Before(h.cutAfter)) {
			return
		}
		l.cut()
	}
	for _, p := range l.chars {
		if p.handoff {
			return
		}
	}
	l.answerHandoff()
}

// settling reports whether a critical event naming a held character awaits the
// orchestrator's answer.
func (l *Loop) settling() bool {
	for _, w := range l.pending {
		for _, id := range w.involves {
			if p := l.chars[id]; p != nil && p.held {
				return true
			}
		}
	}
	return false
}

// cut requests, at this one tick, the handoff transfer of every held character with
// its state now. A request the link does not take leaves the character playing here.
func (l *Loop) cut() {
	h := l.handoff
	h.cutDue = false
	cfg := l.world.Config
	n := 0
	for _, p := range l.chars {
		if !p.held {
			continue
		}
		p.held = false
		st, ok := l.game.State(p.id)
		if !ok {
			l.game.Presence(p.id, gameapi.Freed)
			continue
		}
		st.CharacterID, st.MapID, st.InstanceID = p.id, cfg.MapID, cfg.InstanceID
		req := mapcontract.TransferRequest{
			TransferID: outbox.NewTransferID(), CharacterID: p.id, FromInstanceID: cfg.InstanceID,
			ToInstanceID: cfg.InstanceID, Epoch: p.epoch, State: st, Handoff: true,
		}
		id, tr := p.id, req.TransferID
		err := l.Link.RequestTransfer(req, func(o outbox.TransferOutcome) {
			l.post(message{op: opTransfer, characterID: id, transferID: tr, outcome: o})
		})
		if err != nil {
			l.Log.Warn("handoff transfer not requested; the character stays", "character", p.id, "err", err)
			l.game.Presence(p.id, gameapi.Freed)
			continue
		}
		p.transfer, p.handoff = tr, true
		n++
	}
	l.Log.Info("handoff cut", "generation", h.generation, "tick", l.tick.Load(), "requested", n)
}

// handedOver acts on the answer to p's handoff transfer: granted, the player goes to
// the next container (its connection moved, or told to follow the transfer) and the
// character leaves; refused, it plays on here.
func (l *Loop) handedOver(p *player, o outbox.TransferOutcome) {
	p.handoff = false
	if o.Denied() {
		p.transfer = ""
		l.game.Presence(p.id, gameapi.Freed)
		l.Log.Warn("handoff transfer refused; the character stays", "character", p.id, "code", o.Code, "err", o.Err)
		return
	}
	h, a := l.handoff, o.Answer
	how := "without a connection"
	if p.sess != nil {
		frame, _ := json.Marshal(wire.Event{V: wire.Version, Kind: wire.KindEvent, Name: wire.EventMoving, Data: wire.Moving{Reason: movingReason}})
		l.send(p, frame, false)
	}
	if sess := p.sess; sess != nil {
		hello, _ := json.Marshal(wire.Inbound{V: wire.Version, Kind: wire.KindHello, Ticket: a.Token, Formats: sess.formats})
		if sess.peer.Move(h.generation, hello) {
			how = "moved"
			l.detach(p, 0, "")
		} else {
			how = "transfer message"
			l.sendTransfer(p, a)
			l.detach(p, mapserver.CloseNormal, "transferred")
		}
	}
	if how == "moved" {
		h.moved++
	} else {
		h.transferred++
	}
	l.leave(p)
	l.Log.Info("character handed over", "character", p.id, "transfer", a.TransferID, "generation", h.generation, "how", how)
}

// answerHandoff answers every waiting call with where the handoff stands.
func (l *Loop) answerHandoff() {
	h := l.handoff
	a := l.handoffAnswer()
	for _, c := range h.calls {
		c.result <- a
	}
	h.calls = nil
	l.Log.Info("handoff answered", "generation", h.generation, "moved", a.Moved, "transferred", a.Transferred, "remaining", a.Remaining)
}

// handoffAnswer is where the handoff stands: the characters across since its first
// call, and those still here.
func (l *Loop) handoffAnswer() mapcontract.HandoffAnswer {
	return mapcontract.HandoffAnswer{Moved: l.handoff.moved, Transferred: l.handoff.transferred, Remaining: len(l.chars)}
}
