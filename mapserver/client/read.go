package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/wire"
)

// Mirror is the client's copy of the newest snapshot: exactly what the server sent,
// with no prediction.
type Mirror struct {
	// Tick is the snapshot's simulation tick, Seq the newest input seq it applied.
	Tick uint32
	Seq  uint64
	// Self is the player's own slot, -1 for none.
	Self     int32
	Entities []wire.Entity
}

// Position returns an entity's position in world units.
func Position(e wire.Entity) (x, y float64) {
	return float64(e.X) / QuantaPerUnit, float64(e.Y) / QuantaPerUnit
}

// SelfEntity returns the player's own entity, if the snapshot shows it.
func (m Mirror) SelfEntity() (wire.Entity, bool) {
	for _, e := range m.Entities {
		if e.Slot == m.Self {
			return e, true
		}
	}
	return wire.Entity{}, false
}

// Stats counts what the client received and sent since it started (or since the last
// ResetStats).
type Stats struct {
	// Snapshots and FullSnapshots count decoded snapshot frames; SnapshotBytes their bytes.
	Snapshots, FullSnapshots, SnapshotBytes int64
	// BytesDown counts every payload byte received (snapshots and text messages);
	// BytesUp every payload byte sent, in MessagesUp messages.
	BytesDown, BytesUp, MessagesUp int64
	// EntitiesSeen sums the entity count of every snapshot (divide by Snapshots for the
	// mean in view).
	EntitiesSeen int64
	// BadSnapshots counts frames that did not decode (or lacked a baseline).
	BadSnapshots int64
	// Acks, Errors, Events and Transfers count those messages.
	Acks, Errors, Events, Transfers int64
	// RTT holds the round trips of answered pings (at most maxRTTs, oldest dropped).
	RTT []time.Duration
	// Dropped is set when the server ended the connection or it broke, other than by
	// Close, Drop or a followed transfer (or a resume, with Options.Resume).
	Dropped bool
	// Resumes counts the connections that dropped and resumed (Options.Resume);
	// ResumeTimes holds how long each took, from the drop to the new welcome.
	Resumes     int64
	ResumeTimes []time.Duration
	// Rejoins counts the joins anew after a failed resume (Options.Rejoin).
	Rejoins int64
	// Moves are the player's goings to another container that came back
	// (Options.TrackMoves); PendingMove is one under way.
	Moves []Move
}

const maxRTTs = 4096

// Stats returns a copy of the counters.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.RTT = append([]time.Duration(nil), s.RTT...)
	s.ResumeTimes = append([]time.Duration(nil), s.ResumeTimes...)
	s.Moves = append([]Move(nil), s.Moves...)
	return s
}

// ResetStats zeroes the counters (Dropped stays), starting a measurement window.
func (c *Client) ResetStats() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats = Stats{Dropped: c.stats.Dropped, RTT: c.stats.RTT[:0]}
}

// State returns a copy of the mirror.
func (c *Client) State() Mirror {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.mirror
	m.Entities = append([]wire.Entity(nil), m.Entities...)
	return m
}

// run is the client's one reader: it decodes snapshots, answers nothing but acks, and
// follows transfers; it ends when the connection does.
func (c *Client) run() {
	defer close(c.done)
	dec := wire.NewDecoder(0)
	// One buffer for every message read, grown to the largest: a crowd of bots reads
	// fifteen snapshots a second each, and neither the decoder nor text() keeps the
	// bytes, so a fresh slice per message was garbage for nothing.
	var buf bytes.Buffer
	for {
		c.wmu.Lock()
		ws := c.ws
		c.wmu.Unlock()
		typ, r, err := ws.NextReader()
		if err == nil {
			buf.Reset()
			_, err = buf.ReadFrom(r)
		}
		data := buf.Bytes()
		if err != nil {
			if c.opt.Resume && !c.closing.Load() {
				c.breakAt(MoveResume)
				if _, rerr := c.comeBack(ws, err); rerr == nil {
					dec = wire.NewDecoder(0) // a resumed connection starts with a full snapshot
					continue
				}
			}
			c.ended(err)
			return
		}
		if typ == websocket.BinaryMessage {
			c.snapshot(dec, data)
			continue
		}
		tr, welcomed := c.text(data)
		if welcomed {
			// A welcome on a connection already playing: the map's next container,
			// which moved this socket in a live upgrade. It starts from a full
			// snapshot; no baseline of the old container carries over.
			dec = wire.NewDecoder(0)
		}
		if tr == nil || c.opt.NoFollow {
			continue
		}
		if err := c.follow(tr); err != nil {
			c.ended(err)
			return
		}
		dec = wire.NewDecoder(0) // a new map: no baseline carries over
	}
}

func (c *Client) ended(err error) {
	code := 0
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		code = ce.Code
	}
	if !c.closing.Load() {
		c.mu.Lock()
		c.stats.Dropped = true
		c.mu.Unlock()
	}
	c.closing.Store(true)
	c.flushTimer.Stop()
	c.wmu.Lock()
	c.ws.Close()
	c.wmu.Unlock()
	c.emit(Event{Kind: "closed", Close: code, Err: err})
}

func (c *Client) snapshot(dec *wire.Decoder, data []byte) {
	s, err := dec.Decode(data)
	c.mu.Lock()
	c.stats.BytesDown += int64(len(data))
	if err != nil {
		c.stats.BadSnapshots++
		c.mu.Unlock()
		c.log.Debug("snapshot not decoded", "err", err)
		return
	}
	c.stats.Snapshots++
	c.stats.SnapshotBytes += int64(len(data))
	c.stats.EntitiesSeen += int64(len(s.Entities))
	if s.Full {
		c.stats.FullSnapshots++
	}
	c.mirror.Tick, c.mirror.Seq, c.mirror.Self = s.Tick, s.Seq, s.Self
	c.mirror.Entities = append(c.mirror.Entities[:0], s.Entities...)
	if c.opt.TrackMoves {
		c.snapshotAt(time.Now(), s.Self, s.Entities)
	}
	c.mu.Unlock()
	c.lastTick.Store(uint64(s.Tick))
	c.answerSnapshot(uint64(s.Tick), s.Full || s.Records > 0)
}

// text handles one JSON message and returns the transfer it announces, if any, and
// whether it was a welcome.
func (c *Client) text(data []byte) (*wire.Transfer, bool) {
	var head struct {
		Kind string      `json:"kind"`
		T    json.Number `json:"t"`
	}
	c.mu.Lock()
	c.stats.BytesDown += int64(len(data))
	c.mu.Unlock()
	if err := json.Unmarshal(data, &head); err != nil {
		c.log.Debug("undecodable message", "err", err)
		return nil, false
	}
	switch head.Kind {
	case wire.KindPong:
		sent, err := strconv.ParseInt(head.T.String(), 10, 64)
		if err != nil {
			return nil, false
		}
		rtt := time.Since(c.epoch) - time.Duration(sent)*time.Microsecond
		c.mu.Lock()
		if len(c.stats.RTT) >= maxRTTs {
			c.stats.RTT = append(c.stats.RTT[:0], c.stats.RTT[1:]...)
		}
		c.stats.RTT = append(c.stats.RTT, rtt)
		c.mu.Unlock()
	case wire.KindAck:
		c.count(&c.stats.Acks)
	case wire.KindError:
		var e ServerError
		_ = json.Unmarshal(data, &e)
		c.count(&c.stats.Errors)
		c.emit(Event{Kind: wire.KindError, Error: &e})
	case wire.KindEvent:
		var e wire.Event
		_ = json.Unmarshal(data, &e)
		if e.Name == wire.EventMoving {
			c.breakAt(MoveMoving)
		}
		c.count(&c.stats.Events)
		c.emit(Event{Kind: wire.KindEvent, Event: &e})
	case wire.KindTransfer:
		var t wire.Transfer
		if err := json.Unmarshal(data, &t); err != nil {
			return nil, false
		}
		c.count(&c.stats.Transfers)
		if !c.opt.NoFollow {
			c.breakAt(MoveTransfer)
		}
		c.emit(Event{Kind: wire.KindTransfer, Transfer: &t})
		return &t, false
	case wire.KindWelcome:
		var w wire.Welcome
		if json.Unmarshal(data, &w) == nil {
			c.setWelcome(&w)
			return nil, true
		}
	}
	return nil, false
}

func (c *Client) count(n *int64) {
	c.mu.Lock()
	*n++
	c.mu.Unlock()
}

// follow reconnects to a transfer's destination with its token, swapping the
// connection once the destination has welcomed the player.
func (c *Client) follow(t *wire.Transfer) error {
	url := c.resolve(t.WS)
	ws, w, err := c.handshake(context.Background(), url, Hello{Ticket: t.Token})
	if err != nil {
		return err
	}
	c.wmu.Lock()
	old := c.ws
	c.ws, c.url = ws, url
	c.wmu.Unlock()
	old.Close()
	c.setWelcome(w)
	c.log.Debug("followed transfer", "to", t.ToInstanceID)
	return nil
}

// resume dials the URL of the connection ws that ended with cause again with the
// welcome's resume token, and swaps the connection once the map welcomed the player.
func (c *Client) resume(ws *websocket.Conn, cause error) error {
	dropped := time.Now()
	token := c.Welcome().ResumeToken
	if token == "" {
		return errors.New("no resume token")
	}
	c.wmu.Lock()
	url := c.url
	c.wmu.Unlock()
	ws.Close()
	nws, w, err := c.handshake(context.Background(), url, Hello{Resume: token})
	if err != nil {
		c.log.Debug("resume failed", "cause", cause, "err", err)
		return err
	}
	c.wmu.Lock()
	if c.closing.Load() {
		c.wmu.Unlock()
		nws.Close()
		return errors.New("closed while resuming")
	}
	c.ws = nws
	c.wmu.Unlock()
	c.setWelcome(w)
	took := time.Since(dropped)
	c.mu.Lock()
	c.stats.Resumes++
	if len(c.stats.ResumeTimes) < maxRTTs {
		c.stats.ResumeTimes = append(c.stats.ResumeTimes, took)
	}
	c.mu.Unlock()
	c.log.Debug("resumed", "after", cause, "took", took)
	return nil
}

// resolve turns a public ws path into a URL to dial.
func (c *Client) resolve(path string) string {
	if c.opt.Resolve != nil {
		return c.opt.Resolve(path)
	}
	if strings.HasPrefix(path, "ws://") || strings.HasPrefix(path, "wss://") {
		return path
	}
	return Origin(c.base) + path
}

// Origin returns the scheme and host of a ws URL ("ws://host:port").
func Origin(url string) string {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return url
	}
	host, _, _ := strings.Cut(rest, "/")
	return scheme + "://" + host
}
