package app_test

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/edgelink"
)

// TestMain_Link joins a player through the map's link, as the edge forwards players:
// the link's upgrade on the game listener, a stream's WebSocket upgrade, and the hello
// with a real ticket answered with the welcome.
func TestMain_Link(t *testing.T) {
	f := mustOpenFakeOrch(t)
	m := mustOpenMap(t, f, nil)
	j := f.join(t, `{"name":"ada"}`)

	addr := strings.TrimPrefix(m.GameURL(), "ws://")
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(nc, "GET "+edgelink.Path+" HTTP/1.1\r\nHost: "+addr+"\r\nConnection: Upgrade\r\nUpgrade: "+edgelink.Protocol+"\r\n\r\n")
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("link upgrade: %v %v", resp, err)
	}
	write := func(kind byte, payload []byte) {
		if _, err := nc.Write(append(edgelink.AppendHeader(nil, kind, 1, len(payload)), payload...)); err != nil {
			t.Fatal(err)
		}
	}
	read := func() (byte, []byte) {
		var hdr [edgelink.HeaderSize]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			t.Fatal(err)
		}
		h, err := edgelink.ParseHeader(hdr[:])
		if err != nil || h.Stream != 1 {
			t.Fatalf("record %+v: %v", h, err)
		}
		b := make([]byte, h.Len)
		if _, err := io.ReadFull(br, b); err != nil {
			t.Fatal(err)
		}
		return h.Kind, b
	}
	write(edgelink.KindOpen, []byte("GET /ws HTTP/1.1\r\nHost: "+addr+"\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"))
	if kind, b := read(); kind != edgelink.KindData || !strings.HasPrefix(string(b), "HTTP/1.1 101 ") {
		t.Fatalf("stream upgrade answered %d %q", kind, b)
	}
	// The hello as one masked text frame (a zero mask leaves the payload as it is).
	hello := []byte(`{"v":1,"kind":"hello","ticket":"` + j.Ticket + `"}`)
	frame := binary.BigEndian.AppendUint16([]byte{0x81, 0x80 | 126}, uint16(len(hello)))
	write(edgelink.KindData, append(append(frame, 0, 0, 0, 0), hello...))
	var got []byte
	var payload []byte
	for payload == nil {
		kind, b := read()
		if kind != edgelink.KindData {
			t.Fatalf("record kind %d before the welcome", kind)
		}
		got = append(got, b...)
		payload = firstFrame(got)
	}
	var w map[string]any
	if err := json.Unmarshal(payload, &w); err != nil || w["kind"] != "welcome" || w["characterId"] != j.CharacterID {
		t.Fatalf("first frame %q (%v), want the welcome", payload, err)
	}
	waitFor(t, "the player in the loop", func() bool { return m.Loop.Players() == 1 && m.Players.Active() == 1 })
}

// firstFrame is the payload of the server frame (unmasked, length under 64 KiB) at the
// start of b, or nil while b does not hold all of it.
func firstFrame(b []byte) []byte {
	if len(b) < 2 {
		return nil
	}
	n, h := int(b[1]&0x7F), 2
	if n == 126 {
		if len(b) < 4 {
			return nil
		}
		n, h = int(binary.BigEndian.Uint16(b[2:])), 4
	}
	if len(b) < h+n {
		return nil
	}
	return b[h : h+n]
}
