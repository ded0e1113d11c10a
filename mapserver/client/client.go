// Package client is a Go client of the map server's game protocol: it says hello with a
// join ticket, a transfer token or a resume token, sends sequenced commands (movement
// inputs gathered into one input_batch per snapshot received, batch.go), measures
// round trips with ping/pong, decodes the binary snapshots through wire into a
// prediction-free mirror of what the player sees, acknowledges them so the server can
// send deltas, and follows transfers to the next map. Tests,
// the bots of cmd/mapbots and the benchmarks use it; it does no prediction, so what it
// shows is exactly what the server sent.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/sim"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// QuantaPerUnit converts snapshot positions (quanta) to world units.
const QuantaPerUnit = sim.QuantaPerUnit

// DefaultHandshakeTimeout bounds a dial plus hello plus welcome.
const DefaultHandshakeTimeout = 10 * time.Second

// Hello is what a connection presents first: a join ticket or transfer token (Ticket),
// or the resume token of an earlier welcome (Resume).
type Hello struct {
	Ticket string
	Resume string
}

// AutoAckQuiet is how many snapshots a client that sends no commands lets pass without
// an ack while they change nothing, as the page does. Such a client acknowledges every
// snapshot that changed its view (a full one, or a delta with records), so that no
// change is sent twice; a snapshot that changed nothing is acknowledged only once
// AutoAckQuiet snapshots passed since the last ack, since acking it would not shrink
// the next delta (the map keeps a client's baselines for 16 snapshots). An idle crowd
// where nothing moves sends the map and the edge an eighth of the acks.
const AutoAckQuiet = 8

// Options configure a Client. The zero value works.
type Options struct {
	// Dialer dials the WebSocket; nil means websocket.DefaultDialer.
	Dialer *websocket.Dialer
	// Header is sent with every dial (for example an Origin).
	Header http.Header
	// Resolve turns a transfer's public ws path ("/maps/<id>/ws") into a URL to dial;
	// nil means "the scheme and host of the first URL, plus the path".
	Resolve func(path string) string
	// NoAutoAck stops the client from acknowledging snapshots with ack messages (see
	// AutoAckQuiet); commands, input batches among them, still carry the newest tick.
	// A moving client acks every snapshot on the batch it answers it with anyway; the
	// bots set it so that a snapshot that finds no input gathered costs no message.
	NoAutoAck bool
	// SendEachInput sends every Move at once in an input_batch command of its own, as
	// clients did before inputs were batched per snapshot (BatchIdle); tests of such
	// old clients and before/after comparisons use it.
	SendEachInput bool
	// Now is the clock batching reads (BatchIdle); nil means time.Now.
	Now func() time.Time
	// NoFollow leaves transfers to the caller instead of reconnecting at once.
	NoFollow bool
	// Resume makes a connection that drops after its welcome come back at once, as the
	// page does: the client dials the same URL again with the welcome's resume token
	// and goes on when the map welcomes it. Stats.Resumes counts those, and
	// Stats.ResumeTimes holds how long each took from the drop to the new welcome. A
	// resume that fails ends the client.
	Resume bool
	// TrackMoves records every time the player goes to another container (a moving
	// event, a transfer, a resume, a rejoin) in Stats.Moves: the pause it saw and where
	// its character stood before and after.
	TrackMoves bool
	// Rejoin, with Resume, is how a client whose resume fails comes back: it returns a
	// URL and a hello (a new join's ticket) to dial. Resumes are retried until the map
	// refuses the token, then joins, until DefaultRejoinFor has passed since the drop;
	// Stats.Rejoins counts those that worked.
	Rejoin func(ctx context.Context) (url string, hello Hello, err error)
	// HandshakeTimeout bounds dial + hello + welcome; 0 means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// Log receives debug lines; nil discards them.
	Log *slog.Logger
}

// Event is something the server said that is not a snapshot, or the end of the
// connection. Exactly one field besides Kind is set, or none for "closed".
type Event struct {
	// Kind is welcome, transfer, event, error or closed.
	Kind     string
	Welcome  *wire.Welcome
	Transfer *wire.Transfer
	Event    *wire.Event
	Error    *ServerError
	// Close is the close code of a "closed" event (0 when the socket just broke), and
	// Err what ended it.
	Close int
	Err   error
}

// Client is one player's connection. Its methods are safe for concurrent use.
type Client struct {
	opt   Options
	base  string
	epoch time.Time
	log   *slog.Logger

	wmu      sync.Mutex // serialises writes and connection swaps
	ws       *websocket.Conn
	url      string // the URL ws was dialled at (the base, or a transfer's destination)
	cmdSeq   uint64
	inputSeq uint64
	buf      []byte
	closing  atomic.Bool
	// pending are the inputs gathered and not yet sent (batch.go); heard is when the
	// last snapshot came or the last batch left (BatchIdle).
	pending    []wire.InputEntry
	heard      time.Time
	flushTimer *time.Timer
	flushArmed bool
	// unacked counts the snapshots read since the last ack, carried or not.
	unacked int

	lastTick atomic.Uint64
	events   chan Event
	done     chan struct{}

	mu      sync.Mutex
	moves   moves
	welcome wire.Welcome
	mirror  Mirror
	stats   Stats
}

// Dial connects to url (ws://host:port/path), says hello and waits for the welcome.
// A refused hello returns the server's *ServerError.
func Dial(ctx context.Context, url string, hello Hello, opt Options) (*Client, error) {
	c := &Client{
		opt: opt, base: url, url: url, epoch: time.Now(), log: opt.Log,
		events: make(chan Event, 64), done: make(chan struct{}),
	}
	c.flushTimer = time.AfterFunc(time.Hour, c.flushLate)
	c.flushTimer.Stop()
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	ws, w, err := c.handshake(ctx, url, hello)
	if err != nil {
		return nil, err
	}
	c.ws = ws
	c.setWelcome(w)
	go c.run()
	return c, nil
}

// handshake dials url, sends hello and reads until the welcome (or a refusal).
func (c *Client) handshake(ctx context.Context, url string, hello Hello) (*websocket.Conn, *wire.Welcome, error) {
	timeout := c.opt.HandshakeTimeout
	if timeout <= 0 {
		timeout = DefaultHandshakeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := c.opt.Dialer
	if d == nil {
		d = websocket.DefaultDialer
	}
	ws, resp, err := d.DialContext(ctx, url, c.opt.Header)
	if err != nil {
		if resp != nil {
			return nil, nil, fmt.Errorf("dial %s: %w (status %d)", url, err, resp.StatusCode)
		}
		return nil, nil, fmt.Errorf("dial %s: %w", url, err)
	}
	msg := wire.Inbound{V: wire.Version, Kind: wire.KindHello, Ticket: hello.Ticket, Resume: hello.Resume, Formats: []int{wire.FormatVersion}}
	if deadline, ok := ctx.Deadline(); ok {
		_ = ws.SetReadDeadline(deadline)
		_ = ws.SetWriteDeadline(deadline)
	}
	if err := ws.WriteJSON(msg); err != nil {
		ws.Close()
		return nil, nil, fmt.Errorf("hello: %w", err)
	}
	for {
		typ, data, err := ws.ReadMessage()
		if err != nil {
			ws.Close()
			return nil, nil, fmt.Errorf("wait for welcome: %w", err)
		}
		if typ != websocket.TextMessage {
			continue
		}
		var head struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(data, &head); err != nil {
			ws.Close()
			return nil, nil, fmt.Errorf("wait for welcome: %w", err)
		}
		switch head.Kind {
		case wire.KindWelcome:
			var w wire.Welcome
			if err := json.Unmarshal(data, &w); err != nil {
				ws.Close()
				return nil, nil, fmt.Errorf("decode welcome: %w", err)
			}
			if w.SnapshotFormat != wire.FormatVersion {
				ws.Close()
				return nil, nil, fmt.Errorf("welcome: the map sends snapshot format %d, this client decodes %d", w.SnapshotFormat, wire.FormatVersion)
			}
			_ = ws.SetReadDeadline(time.Time{})
			_ = ws.SetWriteDeadline(time.Time{})
			return ws, &w, nil
		case wire.KindError:
			var e ServerError
			_ = json.Unmarshal(data, &e)
			ws.Close()
			return nil, nil, &e
		}
	}
}

// ServerError is an error message from the server: a refused hello or command (Seq
// names the command) or a protocol error. Code is one of the public error codes.
type ServerError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Seq     uint64 `json:"seq,omitempty"`
}

// Error formats the code and message.
func (e *ServerError) Error() string { return e.Code + ": " + e.Message }

func (c *Client) setWelcome(w *wire.Welcome) {
	c.mu.Lock()
	c.welcome = *w
	c.mirror = Mirror{Self: -1}
	c.mu.Unlock()
	c.lastTick.Store(0)
	c.welcomedBatch()
	c.welcomed()
	c.emit(Event{Kind: wire.KindWelcome, Welcome: w})
}

// Welcome returns the newest welcome: the character, the map it is on, its resume token.
func (c *Client) Welcome() wire.Welcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.welcome
}

// Events delivers what the server said besides snapshots. It is buffered; when nobody
// reads it, events are dropped rather than stalling the client.
func (c *Client) Events() <-chan Event { return c.events }

// Done is closed when the client has stopped for good (closed by Close, or by the
// server, or broken).
func (c *Client) Done() <-chan struct{} { return c.done }

func (c *Client) emit(e Event) {
	select {
	case c.events <- e:
	default:
	}
}

// Close ends the connection with a normal close.
func (c *Client) Close() error {
	if !c.closing.CompareAndSwap(false, true) {
		<-c.done
		return nil
	}
	c.wmu.Lock()
	ws := c.ws
	_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"), time.Now().Add(time.Second))
	c.wmu.Unlock()
	select {
	case <-c.done:
	case <-time.After(2 * time.Second):
		ws.Close()
		<-c.done
	}
	return nil
}

// Drop breaks the connection without a close handshake, as a lost network would; the
// character then waits on the server for a resume.
func (c *Client) Drop() {
	c.closing.Store(true)
	c.wmu.Lock()
	c.ws.Close()
	c.wmu.Unlock()
	<-c.done
}

// Command sends one command with the next command seq and returns that seq, after the
// inputs gathered before it (Move), so that the map reads both in the order they were
// made. The server acknowledges it with an ack message (movement: with the snapshot's
// input seq) or refuses it with an error naming the seq.
func (c *Client) Command(feature, action string, payload any) (uint64, error) {
	raw, err := json.Marshal(payload)
	if err != nil {
		return 0, fmt.Errorf("encode %s/%s payload: %w", feature, action, err)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	c.cmdSeq++
	msg := wire.Inbound{V: wire.Version, Kind: wire.KindCommand, Seq: c.cmdSeq, Feature: feature, Action: action,
		Payload: raw, Tick: c.lastTick.Load()}
	b, err := json.Marshal(msg)
	if err != nil {
		return 0, err
	}
	return c.cmdSeq, c.writeLocked(websocket.TextMessage, b)
}

// Send writes one raw text frame, for tests of malformed messages.
func (c *Client) Send(frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeLocked(websocket.TextMessage, frame)
}

// Ping sends a ping stamped with the client's clock; the pong's round trip lands in
// Stats.RTT.
func (c *Client) Ping() error {
	return c.sendNumber(`{"v":1,"kind":"ping","t":`, uint64(time.Since(c.epoch).Microseconds()))
}

// sendNumber sends prefix, n and a closing brace: the small messages the client sends
// often, built without reflection.
func (c *Client) sendNumber(prefix string, n uint64) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.sendNumberLocked(prefix, n)
}

// sendNumberLocked is sendNumber with wmu held.
func (c *Client) sendNumberLocked(prefix string, n uint64) error {
	b := append(c.buf[:0], prefix...)
	b = strconv.AppendUint(b, n, 10)
	b = append(b, '}')
	c.buf = b
	return c.writeLocked(websocket.TextMessage, b)
}

var errClosed = errors.New("client closed")

func (c *Client) writeLocked(typ int, b []byte) error {
	if c.closing.Load() {
		return errClosed
	}
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if err := c.ws.WriteMessage(typ, b); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	c.mu.Lock()
	c.stats.BytesUp += int64(len(b))
	c.stats.MessagesUp++
	c.mu.Unlock()
	return nil
}
