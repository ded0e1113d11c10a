package conform

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/ticket"
)

// seedAttributes is the durable part of the character the run seeds: nothing a game
// knows, which a map MUST pass on unchanged in its pushes.
const seedAttributes = `{"conform":{"kept":[1,"two",true],"nested":{"n":3.5}}}`

// character is a saved character the run plays: its id and the subject of its tickets
// (the keyed hash of its authKey).
type character struct{ id, subject string }

// shared is what the checks of a run hand on to later ones.
type shared struct {
	spawnA  mapgen.SpawnPoint // where the seeded character stands in the default map
	c1      *character        // the seeded character, played in the default map
	ticket1 string            // c1's first join ticket, redeemed once by ticket-valid
	p1      *player           // c1's connection
	welcome time.Time         // when c1 was welcomed
	seeded  map[string]json.RawMessage
	pool    poolMap
	probe   probeRun
	players []*player // every connection of the run, closed at its end
}

// playTickets plays players in the default map: a valid ticket, its snapshots and
// pings, then tickets the map must refuse.
func (r *runner) playTickets(ctx context.Context) {
	needA := []string{"map-ready"}
	needP := []string{"ticket-valid"}
	r.check(ctx, "ticket-valid", checkTimeout, needA, r.checkTicketValid)
	r.check(ctx, "snapshots", checkTimeout, needP, r.checkSnapshots)
	r.check(ctx, "ping-pong", checkTimeout, needP, r.checkPing)
	r.check(ctx, "ticket-used", checkTimeout, needA, func(ctx context.Context) error {
		if r.ticket1 == "" || len(r.redeemsOf(r.ticket1)) != 1 {
			return errors.New("not run: no ticket was redeemed once before")
		}
		return r.refused(ctx, r.ticket1, apierr.ETICKETUSED, 2)
	})
	r.check(ctx, "ticket-wrong-map", checkTimeout, needA, func(ctx context.Context) error {
		tok, err := r.mint(r.life.adm.Signer, r.someone(), r.x, time.Now(), ticketTTL)
		if err != nil {
			return err
		}
		return r.refused(ctx, tok, apierr.EWRONGMAP, 1)
	})
	r.check(ctx, "ticket-expired", checkTimeout, needA, func(ctx context.Context) error {
		tok, err := r.mint(r.life.adm.Signer, r.someone(), r.a, time.Now().Add(-time.Minute), 10*time.Second)
		if err != nil {
			return err
		}
		return r.refused(ctx, tok, apierr.ETICKETEXPIRED, 1)
	})
	r.check(ctx, "ticket-forged", checkTimeout, needA, func(ctx context.Context) error {
		forger := ticket.NewSigner([]byte(randomHex(32)))
		tok, err := r.mint(forger, r.someone(), r.a, time.Now(), ticketTTL)
		if err != nil {
			return err
		}
		return r.refused(ctx, tok, apierr.ETICKETINVALID, 1)
	})
}

// newCharacter creates a saved character the way a player's first join does; the
// join's own ticket is for the default map.
func (r *runner) newCharacter(ctx context.Context) (*character, *public.JoinResponse, error) {
	key := randomHex(16)
	res, err := r.life.adm.Join(ctx, public.JoinRequest{AuthKey: key, Name: "Conform"})
	if err != nil {
		return nil, nil, fmt.Errorf("join: %w", err)
	}
	subject, err := r.life.adm.Keys.Hash(key)
	if err != nil {
		return nil, nil, err
	}
	return &character{id: res.CharacterID, subject: subject}, res, nil
}

// someone is the character refused tickets are made out to.
func (r *runner) someone() *character {
	if r.c1 != nil {
		return r.c1
	}
	return &character{id: "nobody", subject: "nobody"}
}

// mint makes a join ticket for c into instance `to`, as admission does, signed by s.
func (r *runner) mint(s *ticket.Signer, c *character, to string, issued time.Time, ttl time.Duration) (string, error) {
	return s.Mint(ticket.Claims{Kind: ticket.KindJoin, ID: ticket.NewID(12), Subject: c.subject, CharacterID: c.id,
		From: "-", To: to, IssuedAtMs: issued.UnixMilli(), ExpiresAtMs: issued.Add(ttl).UnixMilli(), Nonce: ticket.NewID(16)})
}

// seed saves a state for c in the default map, at a spawn point, with a revision of now
// in microseconds (what a map elsewhere on this host would have stamped) and
// attributes no game knows.
func (r *runner) seed(ctx context.Context, c *character) error {
	payload, err := json.Marshal(record.CharacterStatePayload{MapID: mapID, InstanceID: r.a,
		X: float64(r.spawnA.X) / 100, Y: float64(r.spawnA.Y) / 100, Attributes: json.RawMessage(seedAttributes)})
	if err != nil {
		return err
	}
	now := time.Now()
	env := record.NewSnapshotEnvelope("conform", 0, now.UnixMilli(), payload)
	if _, err := r.life.db.PutSnapshot(ctx, r.a, record.CharacterPartitionPrefix+c.id, now.UnixMicro(), env); err != nil {
		return fmt.Errorf("seed the character's state: %w", err)
	}
	if r.seeded == nil {
		r.seeded = map[string]json.RawMessage{}
	}
	r.seeded[c.id] = json.RawMessage(seedAttributes)
	return nil
}

// checkTicketValid makes the seeded character and plays its join ticket.
func (r *runner) checkTicketValid(ctx context.Context) error {
	inst, _, err := r.reach(ctx, r.a)
	if err != nil {
		return err
	}
	c, join, err := r.newCharacter(ctx)
	if err != nil {
		return err
	}
	if err := r.seed(ctx, c); err != nil {
		return err
	}
	r.c1, r.ticket1 = c, join.Ticket
	p, err := r.hello(ctx, inst, join.Ticket)
	if err != nil {
		return err
	}
	if p.kind == "welcome" {
		r.p1, r.welcome = p, time.Now()
	}
	return r.checkWelcome(p, join.Ticket, c, r.a)
}

// hello connects a player to inst with a ticket and keeps the connection for cleanup.
func (r *runner) hello(ctx context.Context, inst orchestrator.Instance, token string) (*player, error) {
	p, err := hello(ctx, gameURL(inst), token)
	if err != nil {
		return nil, err
	}
	r.players = append(r.players, p)
	return p, nil
}

// checkWelcome checks the map's answer to a hello with a valid ticket for c into
// instance: one redeem, then a welcome per schema that says what the redeem said and
// carries the start config with the hash of its world.
func (r *runner) checkWelcome(p *player, token string, c *character, instance string) error {
	if p.kind != "welcome" {
		return fmt.Errorf("the hello was answered %s, want a welcome", brief(p.first))
	}
	if err := r.schemas.Validate("player/welcome.json", p.first); err != nil {
		return err
	}
	redeems := r.redeemsOf(token)
	if len(redeems) != 1 {
		return fmt.Errorf("the ticket was redeemed %d times, want once", len(redeems))
	}
	var res mapcontract.RedeemResult
	if redeems[0].Status != http.StatusOK || json.Unmarshal(redeems[0].Answer, &res) != nil {
		return fmt.Errorf("welcomed although the redeem was answered HTTP %d %s", redeems[0].Status, brief(redeems[0].Answer))
	}
	var w struct {
		CharacterID string          `json:"characterId"`
		InstanceID  string          `json:"instanceId"`
		MapID       string          `json:"mapId"`
		Epoch       int64           `json:"epoch"`
		WorldHash   string          `json:"worldHash"`
		MapConfig   json.RawMessage `json:"mapConfig"`
	}
	if err := json.Unmarshal(p.first, &w); err != nil {
		return err
	}
	switch {
	case w.CharacterID != c.id || w.InstanceID != instance || w.MapID != mapID:
		return fmt.Errorf("welcome of character %q in %q of map %q, want %q in %q of %q", w.CharacterID, w.InstanceID, w.MapID, c.id, instance, mapID)
	case w.Epoch != res.Epoch:
		return fmt.Errorf("welcome epoch %d, but the redeem gave %d", w.Epoch, res.Epoch)
	case w.WorldHash != r.hashes[instance]:
		return fmt.Errorf("welcome worldHash %s, want %s (the world of its config)", w.WorldHash, r.hashes[instance])
	case !jsonEqual(w.MapConfig, r.configs[instance]):
		return errors.New("the welcome's mapConfig is not the config the map was started with")
	}
	return nil
}

// redeemsOf returns the answered redeems of token.
func (r *runner) redeemsOf(token string) []call {
	return r.setup.tap.find(mapcontract.PathRedeem, func(c call) bool {
		var req mapcontract.RedeemRequest
		return json.Unmarshal(c.Body, &req) == nil && req.Token == token
	})
}

// checkSnapshots reads the welcomed player's binary frames as format 2 (their header,
// byte by byte as docs/netcode.md lays it out, read here apart from the kit's own decoder
// so a map is held to the document), acknowledging each so that the map may send
// deltas, and checks its JSON messages meanwhile.
func (r *runner) checkSnapshots(ctx context.Context) error {
	const want = 4
	p := r.p1
	decoded := 0
	for decoded < want {
		if err := p.wait(ctx, fmt.Sprintf("%d snapshot frames", want), func() bool { return len(p.binary) > decoded || p.closed }); err != nil {
			return fmt.Errorf("%w (%d received)", err, decoded)
		}
		frames := p.frames()
		if len(frames) == decoded {
			return fmt.Errorf("the connection closed after %d snapshot frames", decoded)
		}
		for ; decoded < len(frames); decoded++ {
			full, tick, err := snapshotHeader(frames[decoded])
			if err != nil {
				return fmt.Errorf("snapshot frame %d: %w", decoded+1, err)
			}
			if decoded == 0 && !full {
				return errors.New("the first snapshot is a delta: it has no baseline")
			}
			if err := p.send(map[string]any{"v": 1, "kind": "ack", "tick": tick}); err != nil {
				return fmt.Errorf("send ack: %w", err)
			}
		}
	}
	for _, m := range p.messages() {
		if err := r.schemas.Validate("player/from-map.json", m); err != nil {
			return fmt.Errorf("message between snapshots %s: %w", brief(m), err)
		}
	}
	return nil
}

// checkPing sends a ping and waits for its pong.
func (r *runner) checkPing(ctx context.Context) error {
	p := r.p1
	const t = 12345.5
	before := len(p.messages())
	if err := p.send(map[string]any{"v": 1, "kind": "ping", "t": t}); err != nil {
		return err
	}
	var pong []byte
	err := p.wait(ctx, "a pong", func() bool {
		for _, m := range p.texts[min(before, len(p.texts)):] {
			var head struct {
				Kind string `json:"kind"`
			}
			if json.Unmarshal(m, &head) == nil && head.Kind == "pong" {
				pong = m
				return true
			}
		}
		return p.closed
	})
	if err != nil {
		return err
	}
	if pong == nil {
		return errors.New("the connection closed before a pong")
	}
	if err := r.schemas.Validate("player/pong.json", pong); err != nil {
		return err
	}
	var got struct {
		T float64 `json:"t"`
	}
	if err := json.Unmarshal(pong, &got); err != nil || got.T != t {
		return fmt.Errorf("pong %s, want t %v", brief(pong), t)
	}
	return nil
}

// refused plays a hello with token in the default map, which must be refused with
// code and closed with 1008, the token redeemed at most wantRedeems times in all: a
// redeem is never retried.
func (r *runner) refused(ctx context.Context, token, code string, wantRedeems int) error {
	inst, _, err := r.reach(ctx, r.a)
	if err != nil {
		return err
	}
	p, err := r.hello(ctx, inst, token)
	if err != nil {
		return err
	}
	defer p.close()
	if p.kind != "error" {
		return fmt.Errorf("the hello was answered %s, want an error %s", brief(p.first), code)
	}
	if err := r.schemas.Validate("player/error.json", p.first); err != nil {
		return err
	}
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(p.first, &e)
	if e.Code != code {
		return fmt.Errorf("refused with %q, want %q (the orchestrator's code)", e.Code, code)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	closeCode, err := p.waitClose(cctx)
	if err != nil {
		return errors.New("the connection was left open after the refusal")
	}
	if closeCode != websocket.ClosePolicyViolation {
		return fmt.Errorf("closed with %d after the refusal, want 1008", closeCode)
	}
	if n := len(r.redeemsOf(token)); n > wantRedeems {
		return fmt.Errorf("the ticket was redeemed %d times in all, want at most %d (one redeem per hello, never retried)", n, wantRedeems)
	}
	return nil
}

// jsonEqual reports whether two JSON documents hold the same value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// snapshotFormat is the binary snapshot layout the contract requires (docs/netcode.md,
// "Snapshot frames").
const snapshotFormat = 2

// snapshotHeader reads a snapshot frame's header as docs/netcode.md lays it out: one
// byte of format (high seven bits) and mode (low bit: 0 full, 1 delta), the tick as an
// unsigned varint, and for a delta how many ticks back its baseline is (at least 1, at
// most the tick).
func snapshotHeader(frame []byte) (full bool, tick uint64, err error) {
	if len(frame) == 0 {
		return false, 0, errors.New("empty frame")
	}
	if f := frame[0] >> 1; f != snapshotFormat {
		return false, 0, fmt.Errorf("format %d, want %d", f, snapshotFormat)
	}
	full = frame[0]&1 == 0
	tick, n := binary.Uvarint(frame[1:])
	if n <= 0 || tick > 1<<32-1 {
		return false, 0, errors.New("no tick after the header byte")
	}
	if !full {
		back, m := binary.Uvarint(frame[1+n:])
		if m <= 0 || back == 0 || back > tick {
			return false, 0, fmt.Errorf("delta of tick %d names no baseline within its ticks", tick)
		}
	}
	return full, tick, nil
}
