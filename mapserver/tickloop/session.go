package tickloop

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/wire"
)

var _ mapserver.Handshaker = (*Loop)(nil)

// session is one admitted connection. Receive and Closed run on the connection's
// reader goroutine: they parse and decode there, off the tick, and post the result.
type session struct {
	l       *Loop
	peer    mapserver.Peer
	dropped atomic.Bool
	// acked is the newest snapshot tick the client acknowledged with an ack message and
	// the tick has not yet taken (0: none). Acks matter only to the next snapshot, so
	// the reader leaves the newest here for it instead of waking the tick goroutine:
	// an idle crowd of a thousand sends fifteen thousand a second.
	acked atomic.Uint64
	// player is the character this connection was attached to; written and read by
	// the tick goroutine only. It saves a lookup by character id per command.
	player *player
	// formats are the snapshot formats the client's hello listed (nil: none), which
	// the hello of a handoff carries to the next container.
	formats []int
	// in is Receive's envelope, reused: the transport never calls Receive twice at
	// once, and a crowd's inputs would otherwise allocate one per message (decoding
	// through an interface moves it to the heap), tens of thousands a second.
	in wire.Inbound
}

var _ mapserver.Session = (*session)(nil)

// Hello admits a connection from its first message: a ticket is redeemed through the
// orchestrator (on this goroutine) and the character spawned by the tick; a resume
// token reattaches the character it was issued for. A hello whose formats leave out
// the snapshot format is refused before either, and so is every hello once the map
// hands its players over to its next container (map_unavailable, handoff.go). A refused
// hello is answered with an error frame and a close (1013 for map_unavailable, else
// 1008).
func (l *Loop) Hello(ctx context.Context, first []byte, binary bool, p mapserver.Peer) mapserver.Session {
	var in wire.Inbound
	if binary || json.Unmarshal(first, &in) != nil || in.V != wire.Version ||
		(in.Kind != wire.KindHello && in.Kind != wire.KindResume) || (in.Ticket == "" && in.Resume == "") {
		refuse(p, apierr.Errorf(apierr.EBADREQUEST,
			`the first message must be {"v":1,"kind":"hello","ticket":"..."} or {"v":1,"kind":"hello","resume":"..."}`))
		return nil
	}
	if !wire.DecodesSnapshots(in.Formats) {
		refuse(p, apierr.Errorf(wire.CodeUnsupportedFormat,
			"this map sends snapshot format %d, which the hello's formats do not list", wire.FormatVersion))
		return nil
	}
	if l.refusing.Load() {
		refuse(p, errMoving)
		return nil
	}
	sess := &session{l: l, peer: p, formats: in.Formats}
	if in.Resume != "" {
		if err := l.ask(message{op: opResume, sess: sess, admit: &admission{token: in.Resume}}); err != nil {
			refuse(p, err)
			return nil
		}
		return sess
	}
	if _, ok := l.waitWorld(ctx); !ok {
		refuse(p, apierr.Errorf(apierr.EMAPUNAVAILABLE, "the map is not ready yet; join again"))
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, l.RedeemWait)
	res, err := l.Redeemer.Redeem(rctx, mapcontract.RedeemRequest{InstanceID: l.world.Config.InstanceID, Token: in.Ticket})
	cancel()
	if err != nil {
		var e *apierr.Error
		if !errors.As(err, &e) {
			l.Log.Error("redeem failed", "err", err)
			err = apierr.Errorf(apierr.EMAPUNAVAILABLE, "the map cannot reach the orchestrator; join again")
		}
		l.Log.Info("player refused", "code", apierr.Code(err), "remote", p.Remote())
		refuse(p, err)
		return nil
	}
	held, err := l.loadItems(ctx, res)
	if err == nil {
		err = l.ask(message{op: opJoin, sess: sess, admit: &admission{res: res, held: held}})
	}
	if res.TransferID != "" {
		r := mapcontract.TransferResult{TransferID: res.TransferID, InstanceID: l.world.Config.InstanceID, Success: err == nil}
		if err != nil {
			r.Reason = apierr.Message(err)
		}
		if rerr := l.Link.ReportTransfer(r); rerr != nil {
			l.Log.Warn("transfer result not queued", "transfer", res.TransferID, "err", rerr)
		}
	}
	if err != nil {
		refuse(p, err)
		return nil
	}
	return sess
}

// loadItems returns the items the orchestrator keeps for a character just redeemed, so
// that it arrives carrying them: the redeem's answer carries them, so a welcome waits
// on one orchestrator call; only an orchestrator of an earlier version, whose answer has
// no items, is asked apart. A map that cannot learn them does not admit the character
// (map_unavailable), rather than let it act on items it may hold.
func (l *Loop) loadItems(ctx context.Context, res *mapcontract.RedeemResult) ([]items.Item, error) {
	if res.Items != nil {
		return res.Items, nil
	}
	if l.Items == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.RedeemWait)
	defer cancel()
	a, err := l.Items.CharacterItems(ctx, mapcontract.CharacterItemsRequest{
		InstanceID: l.world.Config.InstanceID, CharacterID: res.CharacterID, Epoch: res.Epoch,
	})
	if err != nil {
		l.Log.Warn("character items not loaded; join refused", "character", res.CharacterID, "err", err)
		var e *apierr.Error
		if errors.As(err, &e) && e.Code != apierr.EINTERNAL {
			return nil, err
		}
		return nil, apierr.Errorf(apierr.EMAPUNAVAILABLE, "the map cannot load the character's items now; join again")
	}
	return a.Items, nil
}

// ask posts an admission and waits for the tick's answer.
func (l *Loop) ask(m message) error {
	m.admit.result = make(chan error, 1)
	if !l.post(m) {
		return apierr.Errorf(apierr.EMAPUNAVAILABLE, "the map is stopping; join again")
	}
	select {
	case err := <-m.admit.result:
		return err
	case <-l.done:
		select {
		case err := <-m.admit.result:
			return err
		default:
			return apierr.Errorf(apierr.EMAPUNAVAILABLE, "the map is stopping; join again")
		}
	}
}

// waitWorld waits up to WorldWait for the generated world.
func (l *Loop) waitWorld(ctx context.Context) (World, bool) {
	ctx, cancel := context.WithTimeout(ctx, l.WorldWait)
	defer cancel()
	select {
	case <-l.ready:
		return l.world, true
	case <-ctx.Done():
		return World{}, false
	}
}

// Ready reports whether the world has been handed to the loop.
func (l *Loop) Ready() bool {
	select {
	case <-l.ready:
		return true
	default:
		return false
	}
}

// refuse answers a refused hello with the error and closes the connection.
func refuse(p mapserver.Peer, err error) {
	code := apierr.Code(err)
	p.Send(wire.ErrorFrame(code, apierr.Message(err), 0), false)
	if code == apierr.EMAPUNAVAILABLE {
		p.Close(mapserver.CloseTryAgain, code)
		return
	}
	p.Close(mapserver.ClosePolicy, code)
}

// Receive handles one message of an admitted connection. A bad message is refused with
// an error frame and the connection stays open: a client bug must not cost the session.
func (s *session) Receive(data []byte, binary bool) {
	if binary {
		s.fail(apierr.EBADREQUEST, "messages are JSON text frames", 0)
		return
	}
	in := &s.in // DecodeInbound starts it afresh
	if err := wire.DecodeInbound(data, in); err != nil {
		s.fail(apierr.EBADREQUEST, "invalid JSON: "+err.Error(), 0)
		return
	}
	if in.V != wire.Version {
		s.fail(apierr.EBADREQUEST, "unsupported envelope version; this server speaks v=1", 0)
		return
	}
	switch in.Kind {
	case wire.KindPing:
		t := in.T
		if t == "" {
			t = "0"
		}
		frame, err := json.Marshal(wire.Pong{V: wire.Version, Kind: wire.KindPong, T: t})
		if err != nil {
			s.fail(apierr.EBADREQUEST, "t must be a number", 0)
			return
		}
		s.delivered(s.peer.Reply(frame))
	case wire.KindAck:
		if in.Tick == 0 {
			s.fail(apierr.EBADREQUEST, "an ack needs the tick of the snapshot it acknowledges", 0)
			return
		}
		// Only this goroutine stores acked; the tick swaps it out.
		if in.Tick > s.acked.Load() {
			s.acked.Store(in.Tick)
		}
	case wire.KindCommand:
		s.command(in)
	case wire.KindHello, wire.KindResume:
		s.fail(apierr.EBADREQUEST, "already welcomed", 0)
	default:
		s.fail(apierr.EBADREQUEST, "unknown kind "+quote(in.Kind), 0)
	}
}

// command decodes a command here, on the connection's goroutine, and posts it.
func (s *session) command(in *wire.Inbound) {
	if in.Seq == 0 {
		s.l.Metrics.command(cmdMalformed).Inc()
		s.fail(apierr.EBADREQUEST, "a command needs a seq of 1 or more", 0)
		return
	}
	m := message{op: opCommand, sess: s, seq: in.Seq, tick: in.Tick}
	if err := s.decode(in, &m); err != nil {
		s.l.Metrics.command(cmdMalformed).Inc()
		s.fail(apierr.Code(err), apierr.Message(err), in.Seq)
		return
	}
	s.l.post(m)
}

// Closed tells the tick the connection is gone; the character waits for a resume.
func (s *session) Closed() { s.l.post(message{op: opDetach, sess: s}) }

// fail answers a refused message in the connection's urgent lane, like a pong.
func (s *session) fail(code, msg string, seq uint64) {
	s.delivered(s.peer.Reply(wire.ErrorFrame(code, msg, seq)))
}

// send queues a frame on the connection.
func (s *session) send(frame []byte, binary bool) bool {
	return s.delivered(s.peer.Send(frame, binary))
}

// delivered passes on whether a frame was queued. The first refused frame counts the
// connection as dropped (its queue was full); the transport has closed it.
func (s *session) delivered(ok bool) bool {
	if ok {
		return true
	}
	if s.dropped.CompareAndSwap(false, true) {
		s.l.Metrics.Dropped.Inc()
		s.l.Log.Warn("client dropped: its send queue is full", "remote", s.peer.Remote())
	}
	return false
}

func quote(s string) string {
	if len(s) > 32 {
		s = s[:32] + "..."
	}
	b, _ := json.Marshal(s)
	return string(b)
}
