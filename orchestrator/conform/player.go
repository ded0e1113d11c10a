package conform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/orchestrator"
)

// helloTimeout bounds a dial, the hello and the map's first answer: the map may wait
// up to 2 s for its world and then redeems the ticket.
const helloTimeout = 10 * time.Second

// player is one player's connection to a map's game listener, as the kit plays it: it
// says hello with a ticket, keeps the map's first answer (a welcome or an error) as
// sent, then records every later frame and how the connection ended.
type player struct {
	ws    *websocket.Conn
	first []byte // the map's first JSON message
	kind  string // its kind: welcome or error

	wmu sync.Mutex // serialises writes

	mu      sync.Mutex
	texts   [][]byte
	binary  [][]byte
	closed  bool
	code    int // close code; 1006 when the connection broke without one
	changed chan struct{}
}

// gameURL is the WebSocket URL of an instance's game listener: its address on the map
// network, which the edge dials too, or its port published on loopback.
func gameURL(inst orchestrator.Instance) string {
	addr := inst.GameAddr
	if addr == "" {
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(inst.GamePort))
	}
	return "ws://" + addr + mapcontract.GamePath
}

// hello dials url, sends a hello with ticket (listing snapshot format 2, the one the
// kit decodes) and reads the map's first JSON answer.
func hello(ctx context.Context, url, ticket string) (*player, error) {
	ctx, cancel := context.WithTimeout(ctx, helloTimeout)
	defer cancel()
	ws, resp, err := websocket.DefaultDialer.DialContext(ctx, url, nil)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial %s: %w (HTTP %d)", url, err, resp.StatusCode)
		}
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	p := &player{ws: ws, changed: make(chan struct{})}
	deadline, _ := ctx.Deadline()
	_ = ws.SetReadDeadline(deadline)
	if err := p.send(map[string]any{"v": 1, "kind": "hello", "ticket": ticket, "formats": []int{2}}); err != nil {
		ws.Close()
		return nil, fmt.Errorf("send hello: %w", err)
	}
	typ, data, err := ws.ReadMessage()
	if err != nil {
		ws.Close()
		return nil, fmt.Errorf("no answer to the hello: %w", err)
	}
	if typ != websocket.TextMessage {
		ws.Close()
		return nil, errors.New("the map answered the hello with a binary frame, not a welcome or an error")
	}
	var head struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		ws.Close()
		return nil, fmt.Errorf("the answer to the hello is not JSON: %w", err)
	}
	p.first, p.kind = data, head.Kind
	_ = ws.SetReadDeadline(time.Time{})
	go p.read()
	return p, nil
}

// read records every frame until the connection ends.
func (p *player) read() {
	for {
		typ, data, err := p.ws.ReadMessage()
		p.mu.Lock()
		if err != nil {
			p.closed, p.code = true, websocket.CloseAbnormalClosure
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				p.code = ce.Code
			}
		} else if typ == websocket.BinaryMessage {
			p.binary = append(p.binary, data)
		} else {
			p.texts = append(p.texts, data)
		}
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// send writes one JSON message.
func (p *player) send(v any) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_ = p.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return p.ws.WriteJSON(v)
}

// wait blocks until cond holds (asked again after every frame) or ctx ends.
func (p *player) wait(ctx context.Context, what string, cond func() bool) error {
	for {
		p.mu.Lock()
		ch := p.changed
		ok := cond()
		p.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%s: not seen within the check's time", what)
		}
	}
}

// waitClose waits until the map closes the connection and returns its close code.
func (p *player) waitClose(ctx context.Context) (int, error) {
	if err := p.wait(ctx, "the connection closed", func() bool { return p.closed }); err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code, nil
}

// frames returns the binary frames received so far.
func (p *player) frames() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.binary...)
}

// messages returns the JSON messages received after the first.
func (p *player) messages() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.texts...)
}

// close closes the connection (1000) without waiting for the map.
func (p *player) close() {
	p.wmu.Lock()
	_ = p.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	p.wmu.Unlock()
	_ = p.ws.Close()
}
