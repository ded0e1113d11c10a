package loop

import (
	"encoding/json"
	"errors"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/outbox"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// FeatureMovement is the command feature whose inputs snapshots acknowledge (the
// header's input seq), so they get no ack message of their own.
const FeatureMovement = "movement"

// handle applies one message on the tick goroutine.
func (l *Loop) handle(m message) {
	switch m.op {
	case opWorld:
		l.game = m.game
		if p, ok := l.game.(SnapshotPaced); ok {
			p.SetSnapshotHz(l.SnapshotHz)
		}
	case opJoin:
		m.admit.result <- l.join(m.sess, m.admit.res, m.admit.held)
	case opResume:
		m.admit.result <- l.resume(m.sess, m.admit.token)
	case opCommand:
		l.command(m)
	case opDetach:
		if p := l.playerOf(m.sess); p != nil {
			l.detach(p, 0, "")
			l.Log.Info("connection lost; character awaits resume", "character", p.id, "ttl", l.ResumeTTL)
		}
	case opTransfer:
		l.transferred(m.characterID, m.transferID, m.outcome)
	case opCritical:
		l.settle(m.eventID, m.answer)
	case opRecovery:
		l.recovered(m.eventID, m.answer)
	}
}

// join admits a redeemed character: spawned with the state and the items it carries, or,
// when it is
// here already (a second tab, a reload, a connection the server has not yet seen
// drop), taken over by the new connection at the new lease epoch. A takeover is a new
// session: the old connection is told "replaced" and closed with 4000, and the new one
// walks from input seq 1 at once.
func (l *Loop) join(sess *session, res *mapcontract.RedeemResult, held []items.Item) error {
	if l.game == nil {
		return apierr.Errorf(apierr.EMAPUNAVAILABLE, "the map is not ready yet; join again")
	}
	p := l.chars[res.CharacterID]
	if p != nil {
		if p.sess != nil {
			p.sess.send(wire.ErrorFrame(wire.CodeReplaced, "this character was taken over by a newer connection", 0), false)
		}
		l.detach(p, mapserver.CloseReplaced, wire.CodeReplaced)
		p.transfer, p.denied = "", false
		l.game.Hold(p.id, false)
		l.game.NewSession(p.id)
	} else {
		if err := l.game.Spawn(res.CharacterID, res.State); err != nil {
			l.Log.Error("spawn failed", "character", res.CharacterID, "err", err)
			return apierr.Errorf(apierr.EINTERNAL, "the character cannot be placed on this map")
		}
		if hg, ok := l.game.(Holdings); ok {
			hg.Carry(res.CharacterID, held)
		}
		p = &player{id: res.CharacterID, phase: l.nextPhase()}
		l.chars[p.id] = p
		l.index(p)
	}
	p.epoch, p.disposable, p.lastSeq, p.name = res.Epoch, res.Disposable, 0, res.Name
	// Counted before the welcome leaves, so a client that sees its welcome sees itself
	// counted too.
	l.players.Store(int64(len(l.chars)))
	l.attach(p, sess, res.TransferID, false)
	return nil
}

// resume reattaches a character to a new connection with the resume token of its last
// welcome. A token works once, and only until the character is released.
func (l *Loop) resume(sess *session, token string) error {
	p := l.tokens[token]
	if p == nil || p.transfer != "" || (p.sess == nil && !l.Now().Before(p.expires)) {
		return apierr.Errorf(apierr.ETICKETINVALID, "the resume token is unknown, used or expired; join again")
	}
	l.detach(p, mapserver.CloseNormal, "resumed on another connection")
	l.attach(p, sess, "", true)
	return nil
}

// command applies one client command: a seq not above the last accepted one is a
// duplicate and ignored; a command the simulation refuses is answered with an error
// naming its seq; movement is acknowledged by snapshots, anything else by an ack.
func (l *Loop) command(m message) {
	p := l.playerOf(m.sess)
	if p == nil {
		return
	}
	if m.tick != 0 && p.view != nil {
		p.view.Ack(m.tick)
	}
	if m.seq <= p.lastSeq {
		l.Metrics.command(cmdDuplicate).Inc()
		return
	}
	p.lastSeq = m.seq
	if p.transfer != "" {
		l.Metrics.command(cmdIgnored).Inc()
		return
	}
	if q, ok := m.cmd.(wire.NamesQuery); ok {
		l.answerNames(p, m.seq, q)
		return
	}
	if eg, ok := l.game.(Equipment); ok {
		if frame, changed, mine := eg.Equip(p.id, m.seq, m.cmd); mine {
			l.Metrics.command(cmdApplied).Inc()
			if changed {
				// Equipment changes are rare and live only in the character's state:
				// pushed now, a crash rolls them back no further than a critical
				// event, not a whole push period.
				l.push(p)
			}
			if frame != nil {
				l.send(p, frame, false)
			}
			return
		}
	}
	// Movement, nearly every command, is never critical: it draws no event id.
	if cg, ok := l.game.(Criticals); ok && m.feature != FeatureMovement && l.critical(cg, p, m) {
		return
	}
	if err := l.game.Apply(p.id, m.cmd); err != nil {
		l.Metrics.command(cmdRejected).Inc()
		l.send(p, wire.ErrorFrame(apierr.Code(err), apierr.Message(err), m.seq), false)
		return
	}
	l.Metrics.command(cmdApplied).Inc()
	if m.feature != FeatureMovement {
		l.send(p, wire.AckFrame(m.seq), false)
	}
}

// portal starts a transfer for a character that entered a portal: the request carries
// its state, and the character stands still until the orchestrator answers.
func (l *Loop) portal(ev Event) {
	p := l.chars[ev.CharacterID]
	if p == nil || p.transfer != "" {
		return
	}
	tick := l.tick.Load()
	still := p.denied && p.portalTick+1 >= tick
	p.portalTick = tick
	if still {
		return
	}
	p.denied = false
	st, ok := l.game.State(p.id)
	if !ok {
		return
	}
	st.CharacterID, st.MapID, st.InstanceID = p.id, l.world.Config.MapID, l.world.Config.InstanceID
	req := mapcontract.TransferRequest{
		TransferID: outbox.NewTransferID(), CharacterID: p.id, FromInstanceID: l.world.Config.InstanceID,
		ToMapID: ev.Portal.TargetMapID, Epoch: p.epoch, State: st,
	}
	id, tr := p.id, req.TransferID
	err := l.Link.RequestTransfer(req, func(o outbox.TransferOutcome) {
		l.post(message{op: opTransfer, characterID: id, transferID: tr, outcome: o})
	})
	if err != nil {
		l.deny(p, apierr.EMAPUNAVAILABLE, "the map cannot reach the orchestrator now; try again")
		return
	}
	p.transfer = tr
	l.game.Hold(p.id, true)
	l.Log.Info("transfer requested", "character", p.id, "transfer", tr, "toMap", req.ToMapID)
}

// transferred acts on the orchestrator's answer: a granted transfer sends the client
// its token and removes the character (its state went with the request); a denied one
// leaves it where it stands and tells the player why.
func (l *Loop) transferred(characterID, transferID string, o outbox.TransferOutcome) {
	p := l.chars[characterID]
	if p == nil || p.transfer != transferID {
		return
	}
	if o.Denied() {
		p.transfer = ""
		l.game.Hold(p.id, false)
		l.deny(p, o.Code, apierr.Message(o.Err))
		return
	}
	a := o.Answer
	frame, _ := json.Marshal(wire.Transfer{
		V: wire.Version, Kind: wire.KindTransfer, TransferID: a.TransferID, Token: a.Token, WS: a.WS,
		ToInstanceID: a.ToInstanceID, ExpiresAtMs: a.ExpiresAtMs,
	})
	l.send(p, frame, false)
	l.detach(p, mapserver.CloseNormal, "transferred")
	l.game.Despawn(p.id)
	delete(l.chars, p.id)
	delete(l.entities, p.entity)
	delete(l.tokens, p.token)
	l.players.Store(int64(len(l.chars)))
	l.Log.Info("character transferred", "character", p.id, "transfer", transferID, "to", a.ToInstanceID)
}

// notify sends a gameplay event to the connected characters that see it.
func (l *Loop) notify(ev Event) {
	for _, id := range ev.Viewers {
		if p := l.chars[id]; p != nil && p.sess != nil {
			l.send(p, ev.Frame, false)
		}
	}
}

// deny tells a player its transfer was refused; it stays where it stands.
func (l *Loop) deny(p *player, code, msg string) {
	p.denied = true
	frame, _ := json.Marshal(wire.Event{V: wire.Version, Kind: wire.KindEvent, Name: "transfer_denied", Code: code, Message: msg})
	l.send(p, frame, false)
	l.Log.Info("transfer denied", "character", p.id, "code", code)
}

// critical starts a command the orchestrator must make durable first, if m is one: its
// event goes through the link, and the command is answered when the answer comes back
// (settle). A refusal, or a link that takes no more events, is answered at once.
func (l *Loop) critical(cg Criticals, p *player, m message) bool {
	eventID := outbox.NewEventID()
	ev, ok, err := cg.Begin(p.id, p.epoch, eventID, m.cmd)
	if !ok {
		return false
	}
	if err == nil {
		err = l.epochs(ev)
		if err == nil && items.IsKind(ev.Kind) && l.guestIn(ev) {
			err = apierr.Errorf(wire.CodeGuestNoItems, "%s", refusalText[wire.CodeGuestNoItems])
		}
		if r, ok := l.Link.(Reachability); ok && err == nil && r.Away() {
			err = apierr.Errorf(apierr.EMAPUNAVAILABLE, "the orchestrator cannot be reached now; nothing changed hands, try again")
		}
		if err == nil {
			err = l.Link.Critical(*ev, func(_ record.CriticalAck, err error) {
				l.post(message{op: opCritical, eventID: eventID, answer: err})
			})
			if err != nil {
				err = apierr.Errorf(apierr.EMAPUNAVAILABLE, "the map cannot reach the orchestrator now; try again")
			}
		}
		if err == nil {
			l.pending[eventID] = pendingCommand{characterID: p.id, seq: m.seq}
			return true
		}
		_, _ = cg.Settle(eventID, err)
	}
	err = ruleRefusal(err)
	l.Metrics.command(cmdRejected).Inc()
	l.send(p, wire.ErrorFrame(apierr.Code(err), apierr.Message(err), m.seq), false)
	return true
}

// epochs fills in the lease epoch of every character an event involves besides the
// actor (the other party of a trade): each must be here, and not leaving through a
// portal, or the event is not sent (conflict).
func (l *Loop) epochs(ev *record.CriticalEvent) error {
	for id := range ev.Epochs {
		q := l.chars[id]
		if q == nil || q.transfer != "" {
			return apierr.Errorf(apierr.ECONFLICT, "a player the action involves is leaving the map")
		}
		ev.Epochs[id] = q.epoch
	}
	return nil
}

// guestIn reports whether an item event involves a disposable character (a guest):
// the orchestrator keeps items for saved characters only and would refuse it, so the
// map refuses it at once (guest_no_items) and sends nothing.
func (l *Loop) guestIn(ev *record.CriticalEvent) bool {
	for id := range ev.Epochs {
		if q := l.chars[id]; q != nil && q.disposable {
			return true
		}
	}
	return false
}

// pendingCommand is a command waiting for the orchestrator's answer to its event.
type pendingCommand struct {
	characterID string
	seq         uint64
}

// settle answers a command with the orchestrator's answer to its critical event: the
// ack and the gameplay event once it is durable, else the refusal with a public code
// and a sentence for players (orchestratorRefusal: the orchestrator's words and ids
// never reach a player), map_unavailable when it could not be reached.
func (l *Loop) settle(eventID string, answer error) {
	cmd, ok := l.pending[eventID]
	if !ok {
		return
	}
	delete(l.pending, eventID)
	cg, _ := l.game.(Criticals)
	if cg == nil {
		return
	}
	var public *apierr.Error
	if answer != nil && !errors.As(answer, &public) {
		l.Log.Warn("critical event not made durable", "event", eventID, "err", answer)
		answer = apierr.Errorf(apierr.EMAPUNAVAILABLE, "the orchestrator did not confirm the action; nothing changed hands")
	}
	if answer != nil {
		refusal, same := orchestratorRefusal(answer)
		if !same {
			l.Log.Warn("critical event refused", "event", eventID, "character", cmd.characterID, "code", apierr.Code(refusal), "err", answer)
		}
		answer = refusal
	}
	ev, err := cg.Settle(eventID, answer)
	p := l.chars[cmd.characterID]
	if err != nil {
		l.Metrics.command(cmdRejected).Inc()
		if p != nil {
			l.send(p, wire.ErrorFrame(apierr.Code(err), apierr.Message(err), cmd.seq), false)
		}
		return
	}
	l.Metrics.command(cmdApplied).Inc()
	if p != nil {
		l.send(p, wire.AckFrame(cmd.seq), false)
	}
	l.notify(ev)
}
