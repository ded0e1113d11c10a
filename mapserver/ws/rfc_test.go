package ws_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver"
	"github.com/mapyard/mapyard/mapserver/ws"
)

// A raw client of a map's own WebSocket listener: it writes the frames a test builds
// (fragments, invalid UTF-8) as they are, which a WebSocket library would not send.
type rawClient struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

// rawDial upgrades a TCP connection to h's WebSocket with RFC 6455's example key.
func rawDial(t *testing.T, h *harness) *rawClient {
	t.Helper()
	host := strings.TrimPrefix(h.url, "ws://")
	nc, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET / HTTP/1.1\r\nHost: " + host + "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + testKey + "\r\n\r\n"
	if _, err := nc.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	c := &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != testAccept {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	return c
}

// rawWelcomed dials and passes the fake game's hello.
func rawWelcomed(t *testing.T, h *harness) *rawClient {
	t.Helper()
	c := rawDial(t, h)
	c.send(text("good"))
	if op, m := c.frame(); op != 0x1 || m != `{"kind":"welcome"}` {
		t.Fatalf("got %d %q, want the welcome", op, m)
	}
	return c
}

func (c *rawClient) send(frames ...[]byte) {
	c.t.Helper()
	for _, f := range frames {
		if _, err := c.nc.Write(f); err != nil {
			c.t.Fatalf("write: %v", err)
		}
	}
}

// frame reads the next server frame.
func (c *rawClient) frame() (byte, string) {
	c.t.Helper()
	var hdr [4]byte
	if _, err := io.ReadFull(c.br, hdr[:2]); err != nil {
		c.t.Fatalf("read frame: %v", err)
	}
	n := int(hdr[1] & 0x7F)
	if n == 126 {
		if _, err := io.ReadFull(c.br, hdr[2:4]); err != nil {
			c.t.Fatal(err)
		}
		n = int(binary.BigEndian.Uint16(hdr[2:4]))
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(c.br, payload); err != nil {
		c.t.Fatal(err)
	}
	return hdr[0] & 0x0F, string(payload)
}

// wantClose reads frames up to the close frame, checks its code, and ends the
// connection as a client does: its own close frame, then the socket.
func (c *rawClient) wantClose(code int) string {
	c.t.Helper()
	for {
		op, m := c.frame()
		if op != 0x8 {
			continue
		}
		if len(m) < 2 || int(binary.BigEndian.Uint16([]byte(m))) != code {
			c.t.Fatalf("close frame %q, want code %d", m, code)
		}
		c.send(frame(true, 0x8, []byte(m[:2])))
		c.nc.Close()
		return m[2:]
	}
}

// fragments splits a text message into n frames: a text frame, continuations, the
// last one final.
func fragments(msg []byte, n int) [][]byte {
	size := (len(msg) + n - 1) / n
	var out [][]byte
	for i := 0; i < len(msg); i += size {
		op := byte(0x0)
		if i == 0 {
			op = 0x1
		}
		out = append(out, frame(i+size >= len(msg), op, msg[i:min(i+size, len(msg))]))
	}
	return out
}

// TestReadLimit_WholeMessage checks that the 4 KiB limit bounds a message, not a frame,
// on both transports: a message of the limit in fragments is delivered, and four 2 KiB
// fragments close the connection with 1009.
func TestReadLimit_WholeMessage(t *testing.T) {
	atLimit := []byte(strings.Repeat("x", ws.DefaultReadLimit))
	over := []byte(strings.Repeat("y", 4*2048))
	t.Run("Direct", func(t *testing.T) {
		h := newHarness(t, nil)
		c := rawWelcomed(t, h)
		c.send(fragments(atLimit, 2)...)
		if _, m := c.frame(); m != string(atLimit) {
			t.Fatalf("a message of the limit in two fragments: got %d bytes back", len(m))
		}
		c.send(fragments(over, 4)...)
		c.wantClose(mapserver.CloseTooBig)
	})
	t.Run("Link", func(t *testing.T) {
		h := newLinkHarness(t, nil)
		s := h.dialLink(t).welcomed(1)
		s.send(fragments(atLimit, 2)...)
		if _, m := s.frame(); m != string(atLimit) {
			t.Fatalf("a message of the limit in two fragments: got %d bytes back", len(m))
		}
		s.send(fragments(over, 4)...)
		s.wantClose(mapserver.CloseTooBig)
	})
}

// TestInvalidUTF8_Closes1007 sends text messages that are not valid UTF-8, as the hello,
// after the welcome, and split across fragments, on both transports: each closes the
// connection with 1007 (RFC 6455 section 8.1) without reaching the game, while a
// character split across two fragments is valid.
func TestInvalidUTF8_Closes1007(t *testing.T) {
	bad := []byte("{\"v\":1,\"kind\":\"ping\",\"t\":\"\xff\xfe\"}")
	euro := []byte("€uro") // € is three bytes, split by fragments below
	split := [][]byte{frame(false, 0x1, euro[:1]), frame(true, 0x0, euro[1:])}
	badSplit := [][]byte{frame(false, 0x1, euro[:1]), frame(true, 0x0, []byte("uro"))}
	t.Run("Direct", func(t *testing.T) {
		h := newHarness(t, nil)
		c := rawDial(t, h)
		c.send(frame(true, 0x1, []byte("go\xc0od")))
		c.wantClose(mapserver.CloseInvalidPayload)

		c = rawWelcomed(t, h)
		c.send(split...)
		if _, m := c.frame(); m != string(euro) {
			t.Fatalf("a character split across fragments: got %q back", m)
		}
		c.send(frame(true, 0x1, bad))
		if reason := c.wantClose(mapserver.CloseInvalidPayload); reason == "" {
			t.Fatal("the close frame gives no reason")
		}

		c = rawWelcomed(t, h)
		c.send(badSplit...)
		c.wantClose(mapserver.CloseInvalidPayload)
		waitFor(t, "Closed", func() bool { return h.game.Closed() == 2 })
	})
	t.Run("Link", func(t *testing.T) {
		h := newLinkHarness(t, nil)
		l := h.dialLink(t)
		s := l.accept(1)
		s.send(frame(true, 0x1, []byte("go\xc0od")))
		s.wantClose(mapserver.CloseInvalidPayload)

		s = l.welcomed(2)
		s.send(split...)
		if _, m := s.frame(); m != string(euro) {
			t.Fatalf("a character split across fragments: got %q back", m)
		}
		s.send(frame(true, 0x1, bad))
		s.wantClose(mapserver.CloseInvalidPayload)

		s = l.welcomed(3)
		s.send(badSplit...)
		s.wantClose(mapserver.CloseInvalidPayload)
		waitFor(t, "Closed", func() bool { return h.game.Closed() == 2 })
	})
}
