package edge

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mapyard/mapyard/orchestrator/fake/faketest"
)

// engines runs test once per copy engine.
func engines(t *testing.T, test func(t *testing.T, engine string)) {
	for _, e := range []string{EngineEpoll, EngineGoroutine} {
		t.Run(e, func(t *testing.T) { test(t, e) })
	}
}

func newTestProxy(engine string, tune func(*Proxy)) *Proxy {
	p := NewProxy(16, slog.New(slog.DiscardHandler))
	p.Engine = engine
	if tune != nil {
		tune(p)
	}
	return p
}

// tcpPair returns both ends of one loopback TCP connection.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		c   net.Conn
		err error
	}
	acc := make(chan res, 1)
	go func() { c, err := ln.Accept(); acc <- res{c, err} }()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r := <-acc
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { a.Close(); r.c.Close() })
	return a.(*net.TCPConn), r.c.(*net.TCPConn)
}

// openSplice splices two fresh TCP connections through p as Forward does after the
// handshake, and returns the player's end and the map's end. With small, every
// socket has 16 KiB buffers, so that a slow reader soon fills them.
func openSplice(t *testing.T, p *Proxy, small bool) (player, mapEnd *net.TCPConn) {
	t.Helper()
	player, client := tcpPair(t)
	backend, mapEnd := tcpPair(t)
	if small {
		for _, c := range []*net.TCPConn{player, client, backend, mapEnd} {
			_ = c.SetReadBuffer(16 << 10)
			_ = c.SetWriteBuffer(16 << 10)
		}
	}
	s := &splice{p: p, client: client, backend: backend, started: time.Now()}
	s.last.Store(s.started.UnixNano())
	if !p.acquire() || !p.track(s) {
		t.Fatal("proxy refused the connection")
	}
	p.Metrics.opened()
	go p.serve(s)
	return player, mapEnd
}

func closeProxy(t *testing.T, p *Proxy) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
}

// TestSplice_BackPressure sends 1 MiB each way at once through sockets with small
// buffers while the map's end does not read at first and then reads in small pieces:
// every byte arrives, in order, and the byte counters say so.
func TestSplice_BackPressure(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		reg := prometheus.NewRegistry()
		p := newTestProxy(engine, func(p *Proxy) { p.Metrics = NewMetrics(reg) })
		closeProxy(t, p)
		player, mapEnd := openSplice(t, p, true)
		const size = 1 << 20
		up, down := make([]byte, size), make([]byte, size)
		_, _ = rand.Read(up)
		_, _ = rand.Read(down)

		var wg sync.WaitGroup
		var gotUp, gotDown []byte
		var errs [4]error
		wg.Add(3)
		go func() { defer wg.Done(); _, errs[0] = player.Write(up) }()
		go func() { defer wg.Done(); _, errs[1] = mapEnd.Write(down) }()
		go func() { defer wg.Done(); gotDown, errs[2] = slowRead(player, size) }()
		if engine == EngineEpoll && p.engine() != nil {
			faketest.WaitFor(t, "the engine to pause the player's side", func() bool { return p.epoll.paused() > 0 })
		}
		gotUp, errs[3] = slowRead(mapEnd, size)
		wg.Wait()
		player.Close()
		mapEnd.Close()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		if !bytes.Equal(gotUp, up) || !bytes.Equal(gotDown, down) {
			t.Fatalf("bytes differ: up %d of %d, down %d of %d", len(gotUp), size, len(gotDown), size)
		}
		faketest.WaitFor(t, "the splice to end", func() bool { return p.Active() == 0 })
		if u, d := testutil.ToFloat64(p.Metrics.up), testutil.ToFloat64(p.Metrics.down); u != size || d != size {
			t.Fatalf("byte counters up %v down %v, want %d each", u, d, size)
		}
		if n := testutil.ToFloat64(p.Metrics.open); n != 0 {
			t.Fatalf("open connections gauge %v after the end", n)
		}
	})
}

// slowRead reads n bytes from c in small pieces.
func slowRead(c net.Conn, n int) ([]byte, error) {
	out := make([]byte, 0, n)
	buf := make([]byte, 512)
	for len(out) < n {
		k, err := c.Read(buf[:min(len(buf), n-len(out))])
		out = append(out, buf[:k]...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// TestSplice_HalfClose: the player's end of writing reaches the map while the map can
// still answer; the map's close then reaches the player and the splice ends.
func TestSplice_HalfClose(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		p := newTestProxy(engine, nil)
		closeProxy(t, p)
		player, mapEnd := openSplice(t, p, false)
		if _, err := player.Write([]byte("last words")); err != nil {
			t.Fatal(err)
		}
		_ = player.CloseWrite()
		got, err := io.ReadAll(mapEnd)
		if err != nil || string(got) != "last words" {
			t.Fatalf("map read %q, %v", got, err)
		}
		if _, err := mapEnd.Write([]byte("bye")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 3)
		if _, err := io.ReadFull(player, buf); err != nil || string(buf) != "bye" {
			t.Fatalf("player read %q, %v", buf, err)
		}
		mapEnd.Close()
		if rest, err := io.ReadAll(player); err != nil || len(rest) != 0 {
			t.Fatalf("player after map close: %q, %v", rest, err)
		}
		faketest.WaitFor(t, "the splice to end", func() bool { return p.Active() == 0 })
	})
}

// TestSplice_IdleTimeout: traffic keeps a connection open past the idle timeout;
// silence both ways closes it.
func TestSplice_IdleTimeout(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		const idle = 300 * time.Millisecond
		p := newTestProxy(engine, func(p *Proxy) { p.IdleTimeout = idle })
		closeProxy(t, p)
		player, mapEnd := openSplice(t, p, false)
		buf := make([]byte, 1)
		for end := time.Now().Add(3 * idle); time.Now().Before(end); {
			if _, err := player.Write([]byte{1}); err != nil {
				t.Fatalf("write while active: %v", err)
			}
			if _, err := io.ReadFull(mapEnd, buf); err != nil {
				t.Fatalf("read while active: %v", err)
			}
			time.Sleep(idle / 6) // the traffic's pace, not a wait for a result
		}
		start := time.Now()
		_ = player.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := player.Read(buf); err == nil {
			t.Fatal("idle connection got a byte instead of its end")
		}
		if d := time.Since(start); d < idle/2 {
			t.Fatalf("idle connection closed after %v, before the idle timeout %v", d, idle)
		}
		faketest.WaitFor(t, "the splice to end", func() bool { return p.Active() == 0 })
	})
}

// TestSplice_WriteTimeout: a map that stops reading is cut after the write timeout.
func TestSplice_WriteTimeout(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		p := newTestProxy(engine, func(p *Proxy) { p.WriteTimeout = 200 * time.Millisecond })
		closeProxy(t, p)
		player, _ := openSplice(t, p, true) // the map end never reads
		go func() {
			chunk := make([]byte, 64<<10)
			for {
				if _, err := player.Write(chunk); err != nil {
					return
				}
			}
		}()
		faketest.WaitFor(t, "the stuck connection to be cut", func() bool { return p.Active() == 0 })
	})
}

// TestSplice_Drain: Close waits for connections that end on their own, and closes
// the ones still open when its context ends.
func TestSplice_Drain(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		p := newTestProxy(engine, nil)
		player, mapEnd := openSplice(t, p, false)
		done := make(chan error, 1)
		go func() { done <- p.Close(context.Background()) }()
		faketest.WaitFor(t, "the proxy to stop accepting", func() bool { return !p.acquireIfOpen() })
		if _, err := player.Write([]byte("still here")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 10)
		if _, err := io.ReadFull(mapEnd, buf); err != nil {
			t.Fatalf("a draining connection stopped carrying bytes: %v", err)
		}
		player.Close()
		mapEnd.Close()
		if err := <-done; err != nil {
			t.Fatalf("drain of connections that ended: %v", err)
		}

		p = newTestProxy(engine, nil)
		player, _ = openSplice(t, p, false)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err := p.Close(ctx)
		if err == nil || !strings.Contains(err.Error(), "closed 1") {
			t.Fatalf("drain past its timeout: %v, want closed 1", err)
		}
		if p.Active() != 0 {
			t.Fatalf("%d connections left after drain", p.Active())
		}
		_ = player.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := player.Read(buf); err == nil {
			t.Fatal("a drained connection is still open")
		}
	})
}

// acquireIfOpen takes and gives back a slot; false once the proxy is closing.
func (p *Proxy) acquireIfOpen() bool {
	if !p.acquire() {
		return false
	}
	p.release()
	return true
}

// TestSplice_MapGoneBehindBackPressure: a map that sends a large frame to a player who
// reads slowly and then ends without a close frame has every byte of it delivered,
// then the edge's close frame (public.CloseMapGone), then the end of the connection,
// even when the player's socket is full when the map's end is read.
func TestSplice_MapGoneBehindBackPressure(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		p := newTestProxy(engine, nil)
		closeProxy(t, p)
		player, mapEnd := openSplice(t, p, true)
		const size = 256 << 10
		frame := binary.BigEndian.AppendUint64([]byte{0x82, 127}, size)
		frame = append(frame, make([]byte, size)...)
		_, _ = rand.Read(frame[10:])
		go func() {
			_, _ = mapEnd.Write(frame)
			mapEnd.Close()
		}()
		want := append(bytes.Clone(frame), mapGoneClose...)
		got, err := slowRead(player, len(want))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("the player read %d of %d bytes (%v), or other bytes", len(got), len(want), err)
		}
		_ = player.SetReadDeadline(time.Now().Add(5 * time.Second))
		if rest, err := io.ReadAll(player); err != nil || len(rest) != 0 {
			t.Fatalf("after the close frame: %d bytes, %v; want the end", len(rest), err)
		}
		faketest.WaitFor(t, "the splice to end", func() bool { return p.Active() == 0 })
	})
}
