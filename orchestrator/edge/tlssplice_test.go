package edge

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mapyard/mapyard/orchestrator/fake/faketest"
)

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

// openTLSSplice is openSplice with the player speaking TLS to the edge: the edge's
// side is a session over the listener's transport, as a connection the TLS listener
// accepted. early is sent by the player right after the handshake and read in part by
// the edge's side before the splice starts (as the HTTP server's reader does before a
// hijack): the rest stays inside the session, and must reach the map all the same.
func openTLSSplice(t *testing.T, p *Proxy, small bool, early []byte) (player *tls.Conn, mapEnd *net.TCPConn) {
	t.Helper()
	playerTCP, client := tcpPair(t)
	backend, mapEnd := tcpPair(t)
	if small {
		for _, c := range []*net.TCPConn{playerTCP, client, backend, mapEnd} {
			_ = c.SetReadBuffer(16 << 10)
			_ = c.SetWriteBuffer(16 << 10)
		}
	}
	cert, pool := selfSigned(t)
	server := tls.Server(&clientTransport{Conn: client}, &tls.Config{Certificates: []tls.Certificate{cert}})
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
	s := &splice{p: p, client: server, backend: backend, started: time.Now()}
	s.last.Store(s.started.UnixNano())
	if !p.acquire() || !p.track(s) {
		t.Fatal("proxy refused the connection")
	}
	p.Metrics.opened()
	go p.serve(s)
	return player, mapEnd
}

// TestSplice_TLSBackPressure is TestSplice_BackPressure with the player speaking TLS:
// 1 MiB each way through small socket buffers, read slowly, arrives whole and in order
// (sealed and opened by the engine itself with the epoll engine), and the counters
// count the plaintext.
func TestSplice_TLSBackPressure(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		reg := prometheus.NewRegistry()
		p := newTestProxy(engine, func(p *Proxy) { p.Metrics = NewMetrics(reg) })
		closeProxy(t, p)
		player, mapEnd := openTLSSplice(t, p, true, nil)
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
	})
}

// TestSplice_TLSBufferedBeforeTheEngine: what the player sent that its session read
// before the engine took the socket (a record decrypted in part, another not yet)
// reaches the map first, and the connection goes on both ways.
func TestSplice_TLSBufferedBeforeTheEngine(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		p := newTestProxy(engine, nil)
		closeProxy(t, p)
		player, mapEnd := openTLSSplice(t, p, false, []byte("hello, world"))
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

// TestSplice_TLSMapGone: a map that ends without a close frame has the player get its
// last frame and the edge's close frame (public.CloseMapGone), sealed in its session,
// even behind a full socket.
func TestSplice_TLSMapGone(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		p := newTestProxy(engine, nil)
		closeProxy(t, p)
		player, mapEnd := openTLSSplice(t, p, true, nil)
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
		if rest, err := io.ReadAll(player); len(rest) != 0 {
			t.Fatalf("after the close frame: %d bytes, %v; want the end", len(rest), err)
		}
		faketest.WaitFor(t, "the splice to end", func() bool { return p.Active() == 0 })
	})
}
