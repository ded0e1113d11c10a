package edge

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"io"
	"log/slog"
	"math/big"
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

// transports are the two ways a player reaches the edge: plain TCP, and TLS that the
// edge ends itself.
var transports = []struct {
	name string
	tls  bool
}{{"Plain", false}, {"TLS", true}}

// playerConn is the player's end of a splice: a TCP connection, or a TLS session over
// one.
type playerConn interface {
	net.Conn
	CloseWrite() error
}

// spliceOpts says how openSplice connects the player to the edge.
type spliceOpts struct {
	// tls has the player speak TLS to the edge: the edge's side is a session over the
	// listener's transport, as a connection the TLS listener accepted.
	tls bool
	// small gives every socket 16 KiB buffers, so that a slow reader soon fills them.
	small bool
	// early, with tls, is sent by the player right after the handshake and read in
	// part by the edge's side before the splice starts (as the HTTP server's reader
	// does before a hijack): the rest stays inside the session, and must reach the map
	// all the same.
	early []byte
}

// openSplice splices two fresh TCP connections through p as Forward does after the
// handshake, and returns the player's end and the map's end.
func openSplice(t *testing.T, p *Proxy, o spliceOpts) (player playerConn, mapEnd *net.TCPConn) {
	t.Helper()
	playerTCP, client := tcpPair(t)
	backend, mapEnd := tcpPair(t)
	if o.small {
		for _, c := range []*net.TCPConn{playerTCP, client, backend, mapEnd} {
			_ = c.SetReadBuffer(16 << 10)
			_ = c.SetWriteBuffer(16 << 10)
		}
	}
	player = playerTCP
	var edgeSide net.Conn = client
	if o.tls {
		player, edgeSide = tlsSession(t, playerTCP, client, backend, o.early)
	}
	s := &splice{p: p, client: edgeSide, backend: backend, started: time.Now()}
	s.last.Store(s.started.UnixNano())
	if !p.acquire() || !p.track(s) {
		t.Fatal("proxy refused the connection")
	}
	p.Metrics.opened()
	go p.serve(s)
	return player, mapEnd
}

// tlsSession shakes hands over the TCP connection from playerTCP to client, and
// returns the player's session and the edge's, over the listener's transport. early,
// if any, goes as in spliceOpts, with the byte the edge's side reads passed on to
// backend, as Forward would.
func tlsSession(t *testing.T, playerTCP, client, backend *net.TCPConn, early []byte) (player, server *tls.Conn) {
	t.Helper()
	cert, pool := selfSigned(t)
	server = tls.Server(&clientTransport{Conn: client}, &tls.Config{Certificates: []tls.Certificate{cert}})
	player = tls.Client(playerTCP, &tls.Config{RootCAs: pool, ServerName: "localhost"})
	errc := make(chan error, 1)
	go func() { errc <- server.Handshake() }()
	if err := player.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if len(early) > 0 {
		for _, part := range [][]byte{early[:len(early)/2], early[len(early)/2:]} {
			if _, err := player.Write(part); err != nil { // two records
				t.Fatal(err)
			}
		}
		first := make([]byte, 1)
		if _, err := io.ReadFull(server, first); err != nil {
			t.Fatal(err)
		}
		if _, err := backend.Write(first); err != nil { // what Forward passes on itself
			t.Fatal(err)
		}
	}
	return player, server
}

// selfSigned returns a server certificate for localhost and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
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
// every byte arrives, in order, and the byte counters say so. Over TLS, the epoll
// engine seals and opens the bytes itself, and the counters count the plaintext.
func TestSplice_BackPressure(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			engines(t, func(t *testing.T, engine string) {
				reg := prometheus.NewRegistry()
				p := newTestProxy(engine, func(p *Proxy) { p.Metrics = NewMetrics(reg) })
				closeProxy(t, p)
				player, mapEnd := openSplice(t, p, spliceOpts{tls: tr.tls, small: true})
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
					faketest.WaitFor(t, "the engine to pause a side", func() bool { return p.epoll.paused() > 0 })
				}
				gotUp, errs[3] = slowRead(mapEnd, size)
				wg.Wait()
				for i, err := range errs {
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				}
				if !bytes.Equal(gotUp, up) || !bytes.Equal(gotDown, down) {
					t.Fatalf("bytes differ: up %d of %d, down %d of %d", len(gotUp), size, len(gotDown), size)
				}
				player.Close()
				mapEnd.Close()
				faketest.WaitFor(t, "the splice to end", func() bool { return p.Active() == 0 })
				if u, d := testutil.ToFloat64(p.Metrics.up), testutil.ToFloat64(p.Metrics.down); u != size || d != size {
					t.Fatalf("byte counters up %v down %v, want %d each", u, d, size)
				}
				if n := testutil.ToFloat64(p.Metrics.open); n != 0 {
					t.Fatalf("open connections gauge %v after the end", n)
				}
			})
		})
	}
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
		player, mapEnd := openSplice(t, p, spliceOpts{})
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
		player, mapEnd := openSplice(t, p, spliceOpts{})
		buf := make([]byte, 1)
		var start time.Time // the last byte's arrival: the idle time counts from there
		for end := time.Now().Add(3 * idle); ; {
			if _, err := player.Write([]byte{1}); err != nil {
				t.Fatalf("write while active: %v", err)
			}
			if _, err := io.ReadFull(mapEnd, buf); err != nil {
				t.Fatalf("read while active: %v", err)
			}
			if start = time.Now(); start.After(end) {
				break
			}
			time.Sleep(idle / 6) // the traffic's pace, not a wait for a result
		}
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
		player, _ := openSplice(t, p, spliceOpts{small: true}) // the map end never reads
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
		player, mapEnd := openSplice(t, p, spliceOpts{})
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
		player, _ = openSplice(t, p, spliceOpts{})
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
// even when the player's socket is full when the map's end is read. Over TLS, the
// frames are sealed in the player's session.
func TestSplice_MapGoneBehindBackPressure(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			engines(t, func(t *testing.T, engine string) {
				p := newTestProxy(engine, nil)
				closeProxy(t, p)
				player, mapEnd := openSplice(t, p, spliceOpts{tls: tr.tls, small: true})
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
				// Over TLS, only that no byte follows: whether the session ends with a
				// close_notify is not this test's to say.
				if rest, err := io.ReadAll(player); len(rest) != 0 || (err != nil && !tr.tls) {
					t.Fatalf("after the close frame: %d bytes, %v; want the end", len(rest), err)
				}
				faketest.WaitFor(t, "the splice to end", func() bool { return p.Active() == 0 })
			})
		})
	}
}

// TestSplice_TLSBufferedBeforeTheEngine: what the player sent that its session read
// before the engine took the socket (a record decrypted in part, another not yet)
// reaches the map first, and the connection goes on both ways.
func TestSplice_TLSBufferedBeforeTheEngine(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		p := newTestProxy(engine, nil)
		closeProxy(t, p)
		player, mapEnd := openSplice(t, p, spliceOpts{tls: true, early: []byte("hello, world")})
		_ = mapEnd.SetReadDeadline(time.Now().Add(5 * time.Second))
		got := make([]byte, len("hello, world"))
		if _, err := io.ReadFull(mapEnd, got); err != nil || string(got) != "hello, world" {
			t.Fatalf("the map read %q, %v", got, err)
		}
		for i := range 3 {
			if _, err := mapEnd.Write([]byte{'a' + byte(i)}); err != nil {
				t.Fatal(err)
			}
			b := make([]byte, 1)
			_ = player.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(player, b); err != nil || b[0] != 'a'+byte(i) {
				t.Fatalf("the player read %q, %v", b, err)
			}
			if _, err := player.Write(b); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(mapEnd, b); err != nil || b[0] != 'a'+byte(i) {
				t.Fatalf("the map read %q, %v", b, err)
			}
		}
		// The player's close_notify ends its side: the map reads the end.
		if err := player.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if rest, err := io.ReadAll(mapEnd); err != nil || len(rest) != 0 {
			t.Fatalf("the map after the player's close_notify: %q, %v", rest, err)
		}
		mapEnd.Close()
		faketest.WaitFor(t, "the splice to end", func() bool { return p.Active() == 0 })
	})
}
