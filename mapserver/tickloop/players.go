package tickloop

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/gameapi"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/outbox"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// op says what a message asks of the tick.
type op uint8

const (
	opWorld      op = iota // the generated world and its game
	opJoin                 // a redeemed ticket: spawn (or take over) a character
	opResume               // a resume token: reattach a character
	opCommand              // a decoded command
	opDetach               // a connection ended
	opTransfer             // the orchestrator answered a transfer request
	opCritical             // the orchestrator answered a critical event
	opHandoff              // a /control/handoff call
	opHandoffEnd           // a /control/handoff call ran out of time
)

// message is everything a connection or the link tells the tick. One struct for all
// kinds keeps the inbox a plain channel of values.
type message struct {
	op    op
	sess  *session
	seq   uint64
	tick  uint64
	cmd   any
	names *wire.NamesQuery // the kit's own players/names query, instead of cmd
	game  gameapi.Game
	admit *admission
	// opTransfer
	characterID, transferID string
	outcome                 outbox.TransferOutcome
	// opCritical: the event id and the answer (nil: the durable ack)
	eventID string
	answer  error
	// opHandoff, opHandoffEnd
	call *handoffCall
}

// admission is a join or a resume waiting for the tick's answer.
type admission struct {
	res    *mapcontract.RedeemResult // a join's redeemed ticket
	held   []items.Item              // the items the orchestrator says the character holds
	token  string                    // a resume's token
	result chan error                // buffered: the tick never waits for the reader
}

// player is one character in the game state. Only the tick goroutine touches it.
type player struct {
	id         string
	name       string // what players see it by (the redeem's), "" when none
	entity     uint64 // its entity in snapshots (0: the game shows it under none)
	epoch      int64
	disposable bool
	sess       *session // the attached connection; nil while waiting for a resume
	view       gameapi.View
	token      string    // the resume token of the current welcome
	expires    time.Time // while detached: when the character is released
	lastSeq    uint64    // the last command seq accepted
	transfer   string    // the transfer id in flight, if any
	// portalTick is the last tick the character was seen in a portal; after a denied
	// transfer, the portal counts again only once the character has left it.
	portalTick uint64
	denied     bool
	// held: a handoff holds the character for its cut; handoff: the transfer in
	// flight is the handoff's (see handoff.go).
	held, handoff bool
	// phase places the ticks the player's snapshots are built at (see Loop.due).
	phase uint64
}

// attach makes sess p's connection and welcomes it with a fresh resume token.
func (l *Loop) attach(p *player, sess *session, transferID string, resumed bool) {
	if p.token != "" {
		delete(l.tokens, p.token)
	}
	p.token = newToken()
	l.tokens[p.token] = p
	p.sess, p.expires = sess, time.Time{}
	sess.player = p
	gw := l.game.Welcome(p.id)
	p.view = gw.View
	cfg := l.world.Config
	w := wire.Welcome{
		V: wire.Version, Kind: wire.KindWelcome, CharacterID: p.id, Name: p.name,
		InstanceID: cfg.InstanceID, MapID: cfg.MapID, Epoch: p.epoch, WorldHash: l.world.Hash,
		TickHz: l.TickHz, SnapshotHz: l.SnapshotHz, MapConfig: cfg, SnapshotFormat: wire.FormatVersion,
		ResumeToken: p.token, ResumeTTLMs: l.ResumeTTL.Milliseconds(), Resumed: resumed, TransferID: transferID,
		FarView: gw.FarView,
	}
	frame, err := json.Marshal(w)
	if err != nil {
		l.Log.Error("encode welcome", "err", err)
		return
	}
	if !l.send(p, frame, false) {
		return
	}
	l.Log.Info("player welcomed", "character", p.id, "epoch", p.epoch, "resumed", resumed, "transfer", transferID)
	for _, frame := range gw.After {
		if !l.send(p, frame, false) {
			return
		}
	}
}

// detach takes p's connection away: closed with code (0: it is gone already), the
// character stays in the world, still, until a resume or the end of the resume window.
func (l *Loop) detach(p *player, code int, reason string) {
	if p.sess == nil {
		return
	}
	if code != 0 {
		p.sess.peer.Close(code, reason)
	}
	p.sess, p.view = nil, nil
	p.expires = l.Now().Add(l.ResumeTTL)
	if l.game != nil {
		l.game.Presence(p.id, gameapi.Away)
	}
}

// release removes a character from the world after pushing its state, as when a player
// leaves for good.
func (l *Loop) release(p *player, why string) {
	l.detach(p, mapserver.CloseNormal, why)
	l.push(p)
	l.game.Leave(p.id)
	delete(l.chars, p.id)
	delete(l.entities, p.entity)
	delete(l.tokens, p.token)
	l.Log.Info("character released", "character", p.id, "why", why)
}

// push queues a character's state for the orchestrator. A disposable character's is
// pushed too: the orchestrator keeps it in memory, never in its database, so that the
// guest comes back from it after this map crashed.
func (l *Loop) push(p *player) {
	if l.game == nil || p.transfer != "" {
		return
	}
	st, ok := l.game.State(p.id)
	if !ok {
		return
	}
	payload := record.CharacterStatePayload{
		MapID: l.world.Config.MapID, InstanceID: l.world.Config.InstanceID, X: st.X, Y: st.Y, Attributes: st.Attributes,
	}
	if _, err := l.Link.PushCharacter(p.id, p.epoch, int64(l.tick.Load()), payload); err != nil {
		l.Log.Warn("character state not pushed", "character", p.id, "err", err)
	}
}

// pushAll is the periodic push (MAP_SNAPSHOT_PUSH_MS) of every character and of the
// instance partition.
func (l *Loop) pushAll() {
	for _, p := range l.chars {
		l.push(p)
	}
	l.pushInstance()
}

// pushInstance queues the instance's own partition.
func (l *Loop) pushInstance() {
	if l.game == nil {
		return
	}
	if _, err := l.Link.Push(outbox.InstancePartition, int64(l.tick.Load()), l.game.InstanceState()); err != nil {
		l.Log.Warn("instance state not pushed", "err", err)
	}
}

// playerOf returns the character sess is attached to, or nil for a connection that
// was replaced, dropped or never admitted.
func (l *Loop) playerOf(sess *session) *player {
	if sess == nil {
		return nil
	}
	if p := sess.player; p != nil && p.sess == sess {
		return p
	}
	return nil
}

// newToken returns a 144-bit random resume token, URL-safe.
func newToken() string {
	var b [18]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}
