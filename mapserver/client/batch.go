package client

import (
	"strconv"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/wire"
)

// BatchIdle is how long a client that gathers inputs waits for a snapshot before it
// sends them without one: one snapshot interval (66.7 ms) at the default 15 snapshots a
// second.
//
// A client sends its inputs in one input_batch command per snapshot it receives, the
// snapshot's ack carried on the command (docs/netcode.md, Commands and acks): every
// message costs the edge and the map a read, a wake-up and a parse whatever its size,
// and a moving player sending one per input at 30 Hz paid twice the messages of one
// per snapshot, which prediction does not need (the map walks one input per tick from
// its jitter buffer however they arrive). When no snapshot came for BatchIdle since
// the last batch or snapshot, the next input gathered goes at once with those before
// it, so a stalled map still gets inputs at about the default snapshot rate. It does
// not stretch with a slower snapshotHz: a map sending one snapshot a second would
// otherwise get batches of 30 inputs, past the 16 its jitter buffer keeps.
const BatchIdle = time.Second / 15

// Move gathers one movement input (direction dx, dy, each in [-127, 127]) and returns
// its input seq. The input leaves in the next input_batch command: when the next
// snapshot arrives, or at once when nothing arrived for BatchIdle (see there). With
// Options.SendEachInput it leaves at once in a command of its own, as clients before
// batching sent it. Inputs gathered and not yet sent go with any other command sent
// first, so the map reads them in the order they were made. The error is that of a
// write made now (a send failure, or the client closed).
func (c *Client) Move(dx, dy int) (uint64, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closing.Load() {
		return 0, errClosed
	}
	c.inputSeq++
	c.pending = append(c.pending, wire.InputEntry{Seq: c.inputSeq, DX: dx, DY: dy})
	if c.opt.SendEachInput || len(c.pending) >= wire.MaxInputsPerBatch || c.now().Sub(c.heard) >= BatchIdle {
		return c.inputSeq, c.flushLocked()
	}
	if !c.flushArmed {
		// A caller that stops gathering (a test's single step) still has its inputs
		// sent. Half an interval later than Move's own check, so that a caller that
		// gathers at the tick rate sends from Move and this timer seldom fires.
		c.flushArmed = true
		c.flushTimer.Reset(BatchIdle + BatchIdle/2)
	}
	return c.inputSeq, nil
}

// now is the client's clock for batching (Options.Now).
func (c *Client) now() time.Time {
	if c.opt.Now != nil {
		return c.opt.Now()
	}
	return time.Now()
}

// flushLate sends the inputs gathered when the caller stopped gathering and nothing
// arrived since (Move's timer). It runs on the timer's goroutine.
func (c *Client) flushLate() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.flushArmed = false
	if len(c.pending) == 0 || c.closing.Load() {
		return
	}
	if wait := BatchIdle - c.now().Sub(c.heard); wait > 0 {
		// A snapshot or a message came since the timer was set: wait for the next.
		c.flushArmed = true
		c.flushTimer.Reset(wait + BatchIdle/2)
		return
	}
	_ = c.flushLocked()
}

// flushLocked sends the gathered inputs as one input_batch command acknowledging the
// newest snapshot (nothing when none is gathered). The caller holds wmu.
func (c *Client) flushLocked() error {
	if len(c.pending) == 0 {
		return nil
	}
	c.cmdSeq++
	b := c.buf[:0]
	b = append(b, `{"v":1,"kind":"command","seq":`...)
	b = strconv.AppendUint(b, c.cmdSeq, 10)
	if t := c.lastTick.Load(); t != 0 {
		b = append(b, `,"tick":`...)
		b = strconv.AppendUint(b, t, 10)
		c.unacked = 0
	}
	b = append(b, `,"feature":"movement","action":"input_batch","payload":`...)
	b = appendInputs(b, c.pending)
	b = append(b, '}')
	c.buf = b
	c.pending = c.pending[:0]
	c.heard = c.now()
	if c.flushArmed {
		c.flushArmed = false
		c.flushTimer.Stop()
	}
	return c.writeLocked(websocket.TextMessage, b)
}

// appendInputs appends an input_batch payload, {"inputs":[{"seq":1,"dx":127,"dy":0}]},
// without reflection: a crowd of bots sends thousands a second, and each is one
// strconv per number.
func appendInputs(b []byte, inputs []wire.InputEntry) []byte {
	b = append(b, `{"inputs":[`...)
	for i, in := range inputs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"seq":`...)
		b = strconv.AppendUint(b, in.Seq, 10)
		b = append(b, `,"dx":`...)
		b = strconv.AppendInt(b, int64(in.DX), 10)
		b = append(b, `,"dy":`...)
		b = strconv.AppendInt(b, int64(in.DY), 10)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// answerSnapshot answers a decoded snapshot of tick, on the reader goroutine: the
// gathered inputs leave now with its ack, else an ack message when the auto-ack rule
// asks for one (AutoAckQuiet). changed says the snapshot changed the view.
func (c *Client) answerSnapshot(tick uint64, changed bool) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.heard = c.now()
	c.unacked++
	if len(c.pending) > 0 {
		_ = c.flushLocked()
		return
	}
	if !c.opt.NoAutoAck && (changed || c.unacked >= AutoAckQuiet) {
		_ = c.sendNumberLocked(`{"v":1,"kind":"ack","tick":`, tick)
		c.unacked = 0
	}
}

// welcomedBatch restarts the idle clock (BatchIdle) at a welcome, since its snapshots
// are about to arrive.
func (c *Client) welcomedBatch() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.heard = c.now()
}
