package ws

import (
	"time"
)

// flush writes what the lanes hold with non-blocking writevs until they are empty or
// the socket takes no more; what it did not take goes to drainSlow.
func (c *conn) flush(b *batch) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for !c.slow && !c.closeSent && !c.dropped.Load() {
		c.take(b)
		if b.size == 0 {
			return
		}
		n, err := c.writev(b)
		if err != nil {
			c.writeFailed(err)
			return
		}
		if n < b.size {
			// The socket's buffer is full: the client reads slower than it is sent.
			// The rest waits for it on a goroutine of its own; frames queued meanwhile
			// wait in the lanes (a full queue drops the client).
			c.pending, c.slow = b.flatten(n), true
			go c.drainSlow()
			return
		}
		c.wrote(b.close)
	}
}

// writev makes one non-blocking writev of b, or none when the socket has no raw access
// (everything then takes the slow path).
func (c *conn) writev(b *batch) (int, error) {
	if c.raw == nil {
		return 0, nil
	}
	return c.raw.Writev(b.iov)
}

// wrote records a complete write; after the close frame, the client's answer is waited
// for no longer than lingerTimeout (it wakes the reader if the client never answers).
func (c *conn) wrote(closed bool) {
	c.lastWrite.Store(time.Now().UnixNano())
	if closed {
		_ = c.ws.NetConn().SetReadDeadline(time.Now().Add(lingerTimeout))
	}
}

func (c *conn) writeFailed(err error) {
	c.log.Debug("write failed", "err", err)
	c.ws.Close() // unblocks the reader
}

// drainSlow writes, with ordinary blocking writes bounded by the write timeout, what
// the socket did not take and then what the lanes hold, until they are empty. It is the
// only writer while it runs; the client is dropped if a write times out.
func (c *conn) drainSlow() {
	var b batch
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for {
		data := c.pending
		c.pending = nil
		closed := c.closeSent
		if len(data) == 0 && !c.closeSent {
			c.take(&b)
			data, closed = b.flatten(0), b.close
		}
		if len(data) == 0 || c.dropped.Load() {
			c.endSlow()
			if c.queued() > 0 {
				c.schedule()
			}
			return
		}
		if err := c.writeUnlocked(data); err != nil {
			c.writeFailed(err)
			c.endSlow()
			return
		}
		c.wrote(closed)
		if closed {
			c.endSlow()
			return
		}
	}
}

// writeUnlocked writes data with an ordinary blocking write bounded by the write
// timeout, with wmu released meanwhile (slow keeps every other writer out) and held
// again on return.
func (c *conn) writeUnlocked(data []byte) error {
	c.wmu.Unlock()
	defer c.wmu.Lock()
	nc := c.ws.NetConn()
	_ = nc.SetWriteDeadline(time.Now().Add(c.writeTimeout))
	_, err := nc.Write(data)
	// The deadline bounds this write only: left set, it would fail the flusher's later
	// non-blocking writes once it passed.
	_ = nc.SetWriteDeadline(time.Time{})
	return err
}

// endSlow ends the slow path: the flusher and the reader write again. Held: wmu.
func (c *conn) endSlow() {
	c.slow = false
	c.slowDone.Broadcast()
}

// finish writes what is still queued when the reader is done (the error and close
// frames of a refused handshake, a close from the game), with blocking writes: it runs
// on the connection's own goroutine, and holds slow so that nothing else writes, now or
// later.
func (c *conn) finish() {
	var b batch
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for c.slow {
		c.slowDone.Wait()
	}
	c.slow = true
	for !c.closeSent && !c.dropped.Load() {
		c.take(&b)
		if b.size == 0 {
			return
		}
		closed := b.close
		if err := c.writeUnlocked(b.flatten(0)); err != nil {
			c.writeFailed(err)
			return
		}
		c.wrote(closed)
	}
}
