package edge_test

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/kernel/edgelink"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator/edge"
)

// crashingMap is a map's game port that a test drives byte by byte: it answers each
// player's WebSocket upgrade with 101 (and a link's upgrade with 404, so that the edge
// gives each player a connection of its own) and hands the connection over, to send
// frames, or parts of them, and to end as a crashed map does.
type crashingMap struct {
	ln    net.Listener
	conns chan *net.TCPConn
	early []byte // sent right behind the 101, in the same write
}

func newCrashingMap(t *testing.T, early []byte) *crashingMap {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	m := &crashingMap{ln: ln, conns: make(chan *net.TCPConn, 4), early: early}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go m.upgrade(t, c.(*net.TCPConn))
		}
	}()
	return m
}

func (m *crashingMap) upgrade(t *testing.T, c *net.TCPConn) {
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		c.Close()
		return
	}
	if req.URL.Path == edgelink.Path {
		_, _ = io.WriteString(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		c.Close()
		return
	}
	sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	head := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
		base64.StdEncoding.EncodeToString(sum[:]) + "\r\n\r\n"
	if _, err := c.Write(append([]byte(head), m.early...)); err != nil {
		t.Errorf("101: %v", err)
	}
	m.conns <- c
}

func (m *crashingMap) port() int { return m.ln.Addr().(*net.TCPAddr).Port }

// conn waits for the map's side of the next player.
func (m *crashingMap) conn(t *testing.T) *net.TCPConn {
	t.Helper()
	select {
	case c := <-m.conns:
		t.Cleanup(func() { c.Close() })
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no player reached the map")
		return nil
	}
}

// reset ends c with a reset, as a connection whose process died with bytes unread.
func reset(t *testing.T, c *net.TCPConn) {
	t.Helper()
	if err := c.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// readUntilEnd reads what the player gets: the messages before the end, and the end.
func readUntilEnd(t *testing.T, c *websocket.Conn) (msgs []string, end error) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, b, err := c.ReadMessage()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the player's connection did not end; got %q", msgs)
			}
			return msgs, err
		}
		msgs = append(msgs, string(b))
	}
}

// wantEnd checks that the player got the messages want and then the close code code,
// or, with code 1006, an end without a close frame.
func wantEnd(t *testing.T, c *websocket.Conn, code int, want ...string) {
	t.Helper()
	msgs, err := readUntilEnd(t, c)
	if len(msgs) != len(want) {
		t.Fatalf("the player got %q before the end, want %q", msgs, want)
	}
	for i := range want {
		if msgs[i] != want[i] {
			t.Fatalf("the player got %q before the end, want %q", msgs, want)
		}
	}
	if !websocket.IsCloseError(err, code) {
		t.Fatalf("the player's connection ended with %v, want close %d", err, code)
	}
}

// TestEdge_MapGone: when the map's side of a player's connection ends without the
// map's close frame (the map crashed, its connection was reset, the edge's link to it
// broke), the player gets every whole frame the map sent and then the close code
// public.CloseMapGone, so that the page rejoins at once instead of trying a resume
// its map cannot know. A close frame of the map's own reaches the player as it is. A
// map that died inside a frame leaves the edge nothing to add (a close frame would be
// read as the rest of that frame): the connection ends without one (1006). The same
// on a link, over a connection per player with the epoll engine, and with the
// goroutine engine.
func TestEdge_MapGone(t *testing.T) {
	half := text("never whole")
	half = half[:len(half)-4]
	closeNormal := []byte{0x88, 2, 0x03, 0xE8}

	for _, engine := range []string{edge.EngineEpoll, edge.EngineGoroutine} {
		t.Run(engine, func(t *testing.T) {
			open := func(t *testing.T, m *crashingMap) *websocket.Conn {
				t.Helper()
				orch := newFakeOrch(t, ready("forest-1", m.port()))
				e := MustOpenEdge(t, orch.URL, func(c *edge.Config) { c.Engine, c.MapLink = engine, "off" })
				c, _, err := websocket.DefaultDialer.Dial(wsURL(e, "forest-1"), nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c
			}
			t.Run("MapEnds", func(t *testing.T) {
				m := newCrashingMap(t, nil)
				player := open(t, m)
				mc := m.conn(t)
				_, _ = mc.Write(text("last"))
				mc.Close()
				wantEnd(t, player, public.CloseMapGone, "last")
			})
			t.Run("MapReset", func(t *testing.T) {
				m := newCrashingMap(t, nil)
				player := open(t, m)
				reset(t, m.conn(t))
				wantEnd(t, player, public.CloseMapGone)
			})
			t.Run("MapResetWhilePlayerSends", func(t *testing.T) {
				m := newCrashingMap(t, nil)
				player := open(t, m)
				mc := m.conn(t)
				stop := make(chan struct{})
				defer close(stop)
				go func() {
					for {
						select {
						case <-stop:
							return
						case <-time.After(time.Millisecond):
						}
						if player.WriteMessage(websocket.TextMessage, []byte("input")) != nil {
							return
						}
					}
				}()
				time.Sleep(20 * time.Millisecond) // inputs the map never reads
				reset(t, mc)
				wantEnd(t, player, public.CloseMapGone)
			})
			t.Run("MapClosed", func(t *testing.T) {
				m := newCrashingMap(t, nil)
				player := open(t, m)
				mc := m.conn(t)
				_, _ = mc.Write(append(text("bye"), closeNormal...))
				mc.Close()
				wantEnd(t, player, websocket.CloseNormalClosure, "bye")
			})
			t.Run("MapClosedThenReset", func(t *testing.T) {
				// A map that said goodbye and then ended with a reset (its process
				// exited with the player's last inputs unread): the close frame, not
				// the reset, is what the player learns.
				for range 20 {
					m := newCrashingMap(t, nil)
					player := open(t, m)
					mc := m.conn(t)
					_, _ = mc.Write(append(text("bye"), closeNormal...))
					reset(t, mc)
					wantEnd(t, player, websocket.CloseNormalClosure, "bye")
				}
			})
			t.Run("MapDiesInsideAFrame", func(t *testing.T) {
				m := newCrashingMap(t, nil)
				player := open(t, m)
				mc := m.conn(t)
				_, _ = mc.Write(append(text("whole"), half...))
				mc.Close()
				wantEnd(t, player, websocket.CloseAbnormalClosure, "whole")
			})
			t.Run("MapDiesInsideAFrameSentWithIts101", func(t *testing.T) {
				m := newCrashingMap(t, append(text("whole"), half...))
				player := open(t, m)
				m.conn(t).Close()
				wantEnd(t, player, websocket.CloseAbnormalClosure, "whole")
			})
		})
	}

	t.Run("link", func(t *testing.T) {
		open := func(t *testing.T) (*linkMap, *websocket.Conn) {
			t.Helper()
			m := newLinkMap(t)
			e := openLinkEdge(t, m)
			c, _, err := websocket.DefaultDialer.Dial(wsURL(e, "forest-1"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return m, c
		}
		t.Run("LinkLost", func(t *testing.T) {
			m, player := open(t)
			m.send(m.link(0), edgelink.KindData, 1, text("last"))
			m.link(0).Close()
			wantEnd(t, player, public.CloseMapGone, "last")
		})
		t.Run("LinkReset", func(t *testing.T) {
			m, player := open(t)
			m.send(m.link(0), edgelink.KindData, 1, text("last"))
			reset(t, m.link(0).(*net.TCPConn))
			msgs, err := readUntilEnd(t, player)
			if !websocket.IsCloseError(err, public.CloseMapGone) || len(msgs) > 1 {
				t.Fatalf("the player got %q and then %v, want close %d", msgs, err, public.CloseMapGone)
			}
		})
		t.Run("StreamEndedWithoutCloseFrame", func(t *testing.T) {
			m, player := open(t)
			m.send(m.link(0), edgelink.KindData, 1, text("last"))
			m.send(m.link(0), edgelink.KindClose, 1, nil)
			wantEnd(t, player, public.CloseMapGone, "last")
		})
		t.Run("MapClosed", func(t *testing.T) {
			m, player := open(t)
			m.send(m.link(0), edgelink.KindData, 1, append(text("bye"), closeNormal...))
			m.send(m.link(0), edgelink.KindClose, 1, nil)
			wantEnd(t, player, websocket.CloseNormalClosure, "bye")
		})
		t.Run("MapDiesInsideAFrame", func(t *testing.T) {
			m, player := open(t)
			m.send(m.link(0), edgelink.KindData, 1, append(text("whole"), half...))
			m.link(0).Close()
			wantEnd(t, player, websocket.CloseAbnormalClosure, "whole")
		})
	})
}
