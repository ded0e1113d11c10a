package tickloop

import (
	"encoding/json"
	"errors"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/outbox"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// handle applies one message on the tick goroutine.
func (l *Loop) handle(m message) {
	switch m.op {
	case opWorld:
		l.game = m.game
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
	case opHandoff:
		l.startHandoff(m.call)
	case opHandoffEnd:
		l.endHandoffCall(m.call)
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
	if l.handoff != nil {
		return errMoving
	}
	p := l.chars[res.CharacterID]
	if p != nil {
		if p.sess != nil {
			p.sess.send(wire.ErrorFrame(wire.CodeReplaced, "this character was taken over by a newer connection", 0), false)
		}
		l.detach(p, mapserver.CloseReplaced, wire.CodeReplaced)
		p.transfer, p.denied = "", false
		l.game.Presence(p.id, gameapi.Fresh)
	} else {
		entity, err := l.game.Join(gameapi.Arrival{CharacterID: res.CharacterID, Guest: res.Disposable, State: res.State, Items: held})
		if err != nil {
			l.Log.Error("join refused by the game", "character", res.CharacterID, "err", err)
			return apierr.Errorf(apierr.EINTERNAL, "the character cannot be placed on this map")
		}
		p = &player{id: res.CharacterID, phase: l.nextPhase()}
		l.chars[p.id] = p
		l.index(p, entity)
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
	if l.handoff != nil {
		return errMoving
	}
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
	if p.transfer != "" || p.held {
		l.Metrics.command(cmdIgnored).Inc()
		return
	}
	if m.names != nil {
		l.answerNames(p, m.seq, m.names)
		return
	}
	r := l.game.Command(p.id, m.seq, m.cmd, &l.out)
	switch {
	case r.Critical != nil:
		l.critical(p, m.seq, r.Critical)
	case r.Err != nil:
		l.answer(p, m.seq, r.Err)
	default:
		l.Metrics.command(cmdApplied).Inc()
		if !r.Quiet {
			l.send(p, wire.AckFrame(m.seq), false)
		}
	}
	l.act()
}

// answer answers command seq of p with an ack (err nil) or its refusal.
func (l *Loop) answer(p *player, seq uint64, err error) {
	if err != nil {
		l.Metrics.command(cmdRejected).Inc()
		if p != nil {
			l.send(p, wire.ErrorFrame(apierr.Code(err), apierr.Message(err), seq), false)
		}
		return
	}
	l.Metrics.command(cmdApplied).Inc()
	if p != nil {
		l.send(p, wire.AckFrame(seq), false)
	}
}

// act does what the game's last call handed the kit (l.out): notes, then portals,
// critical events and saves, in the order the game gave each. What acting on them makes
// the game say (a critical event that could not be sent, settled at once) is acted on
// right after.
func (l *Loop) act() {
	o := &l.out
	if o.Empty() {
		return
	}
	for _, n := range o.Notes {
		l.notify(n.Frame, n.CharacterIDs)
	}
	for _, e := range o.Portals {
		l.portal(e)
	}
	var unsent []string
	for _, ev := range o.Criticals {
		if !l.sendCritical(ev, pendingCritical{}) {
			unsent = append(unsent, ev.EventID)
		}
	}
	for _, id := range o.Saves {
		if p := l.chars[id]; p != nil {
			l.push(p)
		}
	}
	o.Reset()
	for _, id := range unsent {
		_ = l.game.Settle(id, apierr.Errorf(apierr.EMAPUNAVAILABLE, "the map cannot reach the orchestrator now"), &l.out)
		l.act()
	}
}

// portal starts a transfer for a character that entered a portal: the request carries
// its state, and the character stands still until the orchestrator answers.
func (l *Loop) portal(ev gameapi.Entered) {
	p := l.chars[ev.CharacterID]
	if p == nil || p.transfer != "" || p.held {
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
	l.game.Presence(p.id, gameapi.Held)
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
	if p.handoff {
		l.handedOver(p, o)
		return
	}
	if o.Denied() {
		p.transfer = ""
		l.game.Presence(p.id, gameapi.Freed)
		l.deny(p, o.Code, apierr.Message(o.Err))
		return
	}
	a := o.Answer
	l.sendTransfer(p, a)
	l.detach(p, mapserver.CloseNormal, "transferred")
	l.leave(p)
	l.Log.Info("character transferred", "character", p.id, "transfer", transferID, "to", a.ToInstanceID)
}

// sendTransfer sends p's client the transfer message of a granted transfer, which it
// follows to the destination with the token.
func (l *Loop) sendTransfer(p *player, a *mapcontract.TransferAnswer) {
	frame, _ := json.Marshal(wire.Transfer{
		V: wire.Version, Kind: wire.KindTransfer, TransferID: a.TransferID, Token: a.Token, WS: a.WS,
		ToInstanceID: a.ToInstanceID, ExpiresAtMs: a.ExpiresAtMs,
	})
	l.send(p, frame, false)
}

// leave removes a character whose transfer was granted: its state went with the
// request, and this map no longer holds it.
func (l *Loop) leave(p *player) {
	l.game.Leave(p.id)
	delete(l.chars, p.id)
	delete(l.entities, p.entity)
	delete(l.tokens, p.token)
	l.players.Store(int64(len(l.chars)))
}

// errMoving refuses a hello or a resume once the map hands its players over to the
// next container of its instance: the client's next attempt reaches that one.
var errMoving = apierr.Errorf(apierr.EMAPUNAVAILABLE, "this map is moving to a new version; join again")

// notify sends a frame of the game to those of ids that are connected.
func (l *Loop) notify(frame []byte, ids []string) {
	for _, id := range ids {
		if p := l.chars[id]; p != nil && p.sess != nil {
			l.send(p, frame, false)
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

// critical sends the critical event a command of p needs made durable before it is
// answered (settle answers it). An event the kit cannot send (a character it involves
// is leaving, the orchestrator is away, the link takes no more) is settled at once
// with that refusal, which the game turns into the answer.
func (l *Loop) critical(p *player, seq uint64, ev *record.CriticalEvent) {
	err := l.epochs(ev)
	if err == nil && l.Link.Away() {
		err = apierr.Errorf(apierr.EMAPUNAVAILABLE, "the orchestrator cannot be reached now; nothing changed hands, try again")
	}
	if err == nil && !l.sendCritical(*ev, pendingCritical{characterID: p.id, seq: seq, command: true}) {
		err = apierr.Errorf(apierr.EMAPUNAVAILABLE, "the map cannot reach the orchestrator now; try again")
	}
	if err != nil {
		l.answer(p, seq, l.game.Settle(ev.EventID, err, &l.out))
	}
}

// sendCritical queues a critical event on the link, its answer posted back to the
// tick (settle); false when the link did not take it.
func (l *Loop) sendCritical(ev record.CriticalEvent, waiting pendingCritical) bool {
	id := ev.EventID
	err := l.Link.Critical(ev, func(_ record.CriticalAck, err error) {
		l.post(message{op: opCritical, eventID: id, answer: err})
	})
	if err != nil {
		l.Log.Warn("critical event not sent", "event", id, "err", err)
		return false
	}
	waiting.involves = make([]string, 0, len(ev.Epochs)+1)
	for c := range ev.Epochs {
		waiting.involves = append(waiting.involves, c)
	}
	if waiting.characterID != "" {
		waiting.involves = append(waiting.involves, waiting.characterID)
	}
	l.pending[id] = waiting
	return true
}

// epochs fills in the lease epoch of every character an event involves: each must be
// here, and not leaving through a portal, or the event is not sent (conflict).
func (l *Loop) epochs(ev *record.CriticalEvent) error {
	for id := range ev.Epochs {
		q := l.chars[id]
		if q == nil || q.transfer != "" || q.held {
			return apierr.Errorf(apierr.ECONFLICT, "a player the action involves is leaving the map")
		}
		ev.Epochs[id] = q.epoch
	}
	return nil
}

// pendingCritical is a critical event awaiting the orchestrator's answer: the command
// it answers, or none for an event the game sent on its own.
type pendingCritical struct {
	characterID string
	seq         uint64
	command     bool
	// involves are the characters the event names and the command's: a handoff's cut
	// waits for the answer of every event involving a character it hands over.
	involves []string
}

// settle hands the orchestrator's answer to a critical event to the game and, for an
// event of a command, answers the command with what the game returns: the ack before
// what the outcome shows to others, or the refusal. An answer that is not the
// orchestrator's word (it could not be reached) reaches the game as map_unavailable.
func (l *Loop) settle(eventID string, answer error) {
	w, ok := l.pending[eventID]
	if !ok {
		return
	}
	delete(l.pending, eventID)
	var public *apierr.Error
	switch {
	case answer == nil:
		if !w.command {
			l.Log.Info("critical event made durable", "event", eventID)
		}
	case !errors.As(answer, &public):
		l.Log.Warn("critical event not made durable", "event", eventID, "err", answer)
		answer = apierr.Errorf(apierr.EMAPUNAVAILABLE, "the orchestrator did not confirm the action; nothing changed hands")
	default:
		l.Log.Info("critical event refused", "event", eventID, "character", w.characterID, "code", public.Code, "message", public.Message)
	}
	err := l.game.Settle(eventID, answer, &l.out)
	if w.command {
		l.answer(l.chars[w.characterID], w.seq, err)
	}
	l.act()
}
