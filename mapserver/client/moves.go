package client

import (
	"context"
	"errors"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/wire"
)

// Causes of a Move, from the mildest: the player stays on its socket, follows a transfer
// on a new one, resumes after its socket closed, or joins anew when the resume failed.
const (
	MoveMoving   = "moving"
	MoveTransfer = "transfer"
	MoveResume   = "resume"
	MoveRejoin   = "rejoin"
)

// Move is one time a player left the container it played on for the next one (a live
// upgrade, a restart), as the client lived it (Options.TrackMoves): from the last
// snapshot before the break (a moving event, a transfer message, the socket closing) to
// the first snapshot after the next welcome.
type Move struct {
	// Cause is the worst way the player went across: MoveMoving (on the same socket),
	// MoveTransfer, MoveResume or MoveRejoin.
	Cause string
	// SocketClosed says the player's socket ended: the server side closed it, or the
	// client left it for a transfer's new one.
	SocketClosed bool
	// Began is when the break was seen (the moving event, the transfer, the close), At
	// the last snapshot before it.
	Began, At time.Time
	// Back says a snapshot came after the next welcome; Pause is then the time from At
	// to that snapshot.
	Back  bool
	Pause time.Duration
	// FromX, FromY and ToX, ToY are the player's own position in those two snapshots, in
	// world units; HavePos says both snapshots showed it. A rejoin is a new character:
	// its positions are not compared.
	FromX, FromY, ToX, ToY float64
	HavePos                bool
}

// DefaultRejoinFor is how long a client with Options.Rejoin keeps trying to come back
// (a resume, then joins) after its socket closed.
const DefaultRejoinFor = 30 * time.Second

// rejoinRetry is the wait between two attempts to come back.
const rejoinRetry = 250 * time.Millisecond

// moves is the reader goroutine's tracking of the current break (Options.TrackMoves).
type moves struct {
	lastAt         time.Time
	lastX, lastY   float64
	lastHave       bool
	pending        *Move
	pendingWelcome bool // a welcome came after the break
}

// worse orders the causes.
var worse = map[string]int{MoveMoving: 1, MoveTransfer: 2, MoveResume: 3, MoveRejoin: 4}

// breakAt notes a break of the given cause: the first opens a Move from the last
// snapshot, a later one before the player is back makes it worse. Reader goroutine.
func (c *Client) breakAt(cause string) {
	if !c.opt.TrackMoves {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := &c.moves
	if m.pending == nil {
		m.pending = &Move{Cause: cause, Began: time.Now(), At: m.lastAt, FromX: m.lastX, FromY: m.lastY, HavePos: m.lastHave}
	} else if worse[cause] > worse[m.pending.Cause] {
		m.pending.Cause = cause
	}
	if cause != MoveMoving {
		m.pending.SocketClosed = true
	}
	if cause == MoveRejoin {
		m.pending.HavePos = false
	}
	m.pendingWelcome = false
}

// welcomed notes a welcome (reader goroutine, or Dial before it).
func (c *Client) welcomed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.moves.pending != nil {
		c.moves.pendingWelcome = true
	}
}

// snapshotAt notes a decoded snapshot: it closes the pending Move when it follows the
// next welcome, and is otherwise the last snapshot before any next break. Snapshots
// between a break and the next welcome (from the container being left) count for
// neither. Reader goroutine; the caller holds c.mu.
func (c *Client) snapshotAt(now time.Time, self int32, es []wire.Entity) {
	m := &c.moves
	var x, y float64
	have := false
	for _, e := range es {
		if e.Slot == self {
			x, y, have = float64(e.X)/QuantaPerUnit, float64(e.Y)/QuantaPerUnit, true
			break
		}
	}
	if p := m.pending; p != nil {
		if !m.pendingWelcome {
			return
		}
		p.Back, p.Pause, p.ToX, p.ToY = true, now.Sub(p.At), x, y
		p.HavePos = p.HavePos && have && !p.At.IsZero()
		if p.At.IsZero() {
			p.Pause = 0
		}
		c.stats.Moves = append(c.stats.Moves, *p)
		m.pending = nil
	}
	m.lastAt, m.lastX, m.lastY, m.lastHave = now, x, y, have
}

// PendingMove returns the break the client is in, if any: a Move not back (yet).
func (c *Client) PendingMove() (Move, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.moves.pending == nil {
		return Move{}, false
	}
	return *c.moves.pending, true
}

// comeBack brings a client whose socket closed back: a resume, and with
// Options.Rejoin, more resumes and then joins until DefaultRejoinFor has passed. It
// returns the cause that worked (MoveResume or MoveRejoin).
func (c *Client) comeBack(ws *websocket.Conn, cause error) (string, error) {
	if c.opt.Rejoin == nil {
		if err := c.resume(ws, cause); err != nil {
			return "", err
		}
		return MoveResume, nil
	}
	deadline := time.Now().Add(DefaultRejoinFor)
	var err error = errMapGone
	if !websocket.IsCloseError(cause, public.CloseMapGone) {
		// The edge's map-gone close says the process that knew the resume token is
		// gone: the page joins again at once, and so does this client.
		err = c.resume(ws, cause)
	}
	for err != nil && err != errMapGone && time.Now().Before(deadline) && !c.closing.Load() {
		var refused *ServerError
		if errors.As(err, &refused) {
			break // the map refused the token: the character is not coming back this way
		}
		time.Sleep(rejoinRetry)
		err = c.resume(ws, cause)
	}
	if err == nil {
		return MoveResume, nil
	}
	c.breakAt(MoveRejoin)
	for time.Now().Before(deadline) && !c.closing.Load() {
		if err = c.rejoin(); err == nil {
			return MoveRejoin, nil
		}
		time.Sleep(rejoinRetry)
	}
	return "", err
}

// errMapGone is why a client closed with the map-gone close does not resume.
var errMapGone = errors.New("the map is gone (close 4001): joining again")

// rejoin joins anew through Options.Rejoin and swaps the connection once welcomed.
func (c *Client) rejoin() error {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultHandshakeTimeout)
	defer cancel()
	url, hello, err := c.opt.Rejoin(ctx)
	if err != nil {
		return err
	}
	nws, w, err := c.handshake(ctx, url, hello)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	if c.closing.Load() {
		c.wmu.Unlock()
		nws.Close()
		return errClosed
	}
	c.ws, c.url = nws, url
	c.wmu.Unlock()
	c.setWelcome(w)
	c.count(&c.stats.Rejoins)
	return nil
}
