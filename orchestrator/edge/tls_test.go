package edge_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/ws"
	"github.com/mapyard/mapyard/orchestrator/edge"
)

// testHost is the name the edge's test certificates are for; clients ask for it by
// SNI while dialling the edge's loopback address.
const testHost = "play.mapyard.test"

// testCA is a certificate authority of the test's own, which its clients trust.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	next int64
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mapyard test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool, next: 1}
}

// issue returns a PEM certificate for names, valid over [from, until], and its key.
func (ca *testCA) issue(t testing.TB, from, until time.Time, names ...string) (certPEM, keyPEM []byte, leaf *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.next++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.next), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: from, NotAfter: until, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ = x509.ParseCertificate(der)
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), leaf
}

// writeFile replaces path's content at once (a rename), as a careful host does.
func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// lines returns the log lines whose message is msg.
func (b *logBuffer) lines(msg string) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(b.buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// httpsEdge is an edge serving HTTPS with a certificate for testHost from ca, read
// from files in a directory of the test's (certFile, keyFile).
type httpsEdge struct {
	*edge.Edge
	certFile, keyFile string
	log               *logBuffer
}

func openHTTPSEdge(t testing.TB, ca *testCA, orchURL string, tune func(*edge.Config)) *httpsEdge {
	t.Helper()
	dir := t.TempDir()
	h := &httpsEdge{certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key"), log: &logBuffer{}}
	certPEM, keyPEM, _ := ca.issue(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), testHost)
	writeFile(t, h.certFile, certPEM)
	writeFile(t, h.keyFile, keyPEM)
	h.Edge = MustOpenEdgeLog(t, orchURL, h.log.logger(), func(c *edge.Config) {
		c.TLSCertFile, c.TLSKeyFile, c.TLSReloadMS = h.certFile, h.keyFile, 100
		c.HSTSMaxAgeS, c.TLSHandshakeTimeoutMS = 31536000, 2000
		if tune != nil {
			tune(c)
		}
	})
	return h
}

// tlsConfig trusts ca and asks for testHost.
func (ca *testCA) tlsConfig() *tls.Config {
	return &tls.Config{RootCAs: ca.pool, ServerName: testHost}
}

// httpsClient is an HTTP client of the edge's HTTPS listener that trusts ca and
// follows no redirect.
func (ca *testCA) httpsClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: ca.tlsConfig()},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (ca *testCA) dialer() *websocket.Dialer {
	return &websocket.Dialer{TLSClientConfig: ca.tlsConfig(), HandshakeTimeout: 10 * time.Second}
}

// playing is a player of a real map transport through the edge, pinging its map every
// 10 ms on a goroutine of its own and counting the pongs, so that a test sees whether
// its connection carried traffic, unharmed, the whole time.
type playing struct {
	pongs atomic.Int64
	stop  chan struct{}
	done  chan struct{}
	err   atomic.Value
}

func startPlaying(t testing.TB, d *websocket.Dialer, url string) *playing {
	t.Helper()
	c, _, err := d.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"v":1,"kind":"hello","ticket":"t"}`)); err != nil {
		t.Fatal(err)
	}
	if _, got, err := c.ReadMessage(); err != nil || !strings.Contains(string(got), "welcome") {
		t.Fatalf("welcome: %q, %v", got, err)
	}
	p := &playing{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for i := 1; ; i++ {
			select {
			case <-p.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if err := c.WriteMessage(websocket.TextMessage, fmt.Appendf(nil, `{"v":1,"kind":"ping","t":%d}`, i)); err != nil {
				p.err.Store(err)
				return
			}
			if _, got, err := c.ReadMessage(); err != nil || !strings.Contains(string(got), `"t":`+strconv.Itoa(i)) {
				p.err.Store(fmt.Errorf("pong %d: %q, %v", i, got, err))
				return
			}
			p.pongs.Add(1)
		}
	}()
	t.Cleanup(p.end)
	return p
}

func (p *playing) end() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// check fails the test if the player's connection failed, and waits for more pongs.
func (p *playing) check(t testing.TB) {
	t.Helper()
	n := p.pongs.Load()
	waitFor(t, "the player's next pongs", func() bool { return p.pongs.Load() >= n+3 || p.err.Load() != nil })
	if err, _ := p.err.Load().(error); err != nil {
		t.Fatalf("the player playing meanwhile: %v", err)
	}
}

// TestHTTPS_PlaysOverTLS serves the page, the API and players' WebSockets over HTTPS
// with a certificate from files, with each copy engine: a player of the real map
// transport over a link (epoll) or a connection of its own, and large messages both
// ways, sealed and opened in the epoll engine's loop.
func TestHTTPS_PlaysOverTLS(t *testing.T) {
	ca := newTestCA(t)
	for _, engine := range []string{edge.EngineEpoll, edge.EngineGoroutine} {
		t.Run(engine, func(t *testing.T) {
			srv := ws.NewServer(benchGame{}, slog.New(slog.DiscardHandler))
			game := gameListener(t, srv)
			echo := echoBackend(t)
			orch := newFakeOrch(t, ready("forest-1", portOf(t, game)), ready("echo-1", portOf(t, echo)))
			e := openHTTPSEdge(t, ca, orch.URL, func(c *edge.Config) { c.Engine = engine })
			if !strings.HasPrefix(e.PublicURL(), "https://") {
				t.Fatalf("public URL %s", e.PublicURL())
			}
			hc := ca.httpsClient()
			resp, err := hc.Get(e.PublicURL() + "/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
				t.Fatalf("GET / over HTTPS: %d, TLS %+v", resp.StatusCode, resp.TLS)
			}
			// HTTP/1.1 only, whatever the client offers; TLS 1.1 is refused.
			cfg := ca.tlsConfig()
			cfg.NextProtos = []string{"h2", "http/1.1"}
			tc, err := tls.Dial("tcp", strings.TrimPrefix(e.PublicURL(), "https://"), cfg)
			if err != nil {
				t.Fatal(err)
			}
			tc.Close()
			if got := tc.ConnectionState().NegotiatedProtocol; got != "http/1.1" {
				t.Fatalf("offered h2 and http/1.1, the edge chose %q", got)
			}
			cfg = ca.tlsConfig()
			cfg.MaxVersion = tls.VersionTLS11
			if tc, err := tls.Dial("tcp", strings.TrimPrefix(e.PublicURL(), "https://"), cfg); err == nil {
				tc.Close()
				t.Fatal("a TLS 1.1 handshake completed")
			}
			resp, err = hc.Post(e.PublicURL()+public.PathJoin, "application/json", strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "ticket") {
				t.Fatalf("join over HTTPS: %d %s", resp.StatusCode, body)
			}

			p := startPlaying(t, ca.dialer(), wsURL(e.Edge, "forest-1"))
			p.check(t)
			if engine == edge.EngineEpoll {
				if n := metricValue(t, e.Edge, "mapyard_edge_map_links"); n != "1" {
					t.Fatalf("mapyard_edge_map_links = %q: the player is not on a link", n)
				}
			}
			c, _, err := ca.dialer().Dial(wsURL(e.Edge, "echo-1"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var seen map[string]string
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if err := c.ReadJSON(&seen); err != nil || seen["xff"] != "127.0.0.1" {
				t.Fatalf("the map saw %v, %v", seen, err)
			}
			for _, size := range []int{1, 100, 16 << 10, 200 << 10} {
				echoOnce(t, c, strings.Repeat(strconv.Itoa(size%10), size))
			}
			p.check(t)
			if v := metricValue(t, e.Edge, "mapyard_edge_tls_handshakes_total"); v == "" || v == "0" {
				t.Fatalf("mapyard_edge_tls_handshakes_total = %q", v)
			}
		})
	}
}

// TestHTTPS_RedirectAndHSTS: the plain HTTP listener sends every request to the same
// host and path over HTTPS with 308, and every HTTPS answer, errors included, carries
// Strict-Transport-Security; EDGE_HSTS_MAX_AGE_S=0 leaves it out.
func TestHTTPS_RedirectAndHSTS(t *testing.T) {
	ca := newTestCA(t)
	e := openHTTPSEdge(t, ca, newFakeOrch(t).URL, func(c *edge.Config) { c.HTTPAddr = "127.0.0.1:0" })
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(e.PublicURL(), "https://"))
	plain := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/"},
		{http.MethodGet, "/maps/forest-1/ws?resume=abc&x=%2F"},
		{http.MethodPost, public.PathJoin},
	} {
		req, _ := http.NewRequest(tc.method, e.HTTPURL()+tc.path, nil)
		req.Host = testHost
		resp, err := plain.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := "https://" + testHost + ":" + port + tc.path
		if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
			t.Fatalf("%s %s on port 80's listener: %d to %q, want 308 to %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Location"), want)
		}
		if resp.Header.Get("Strict-Transport-Security") != "" {
			t.Fatal("HSTS on a plain HTTP answer")
		}
	}
	hc := ca.httpsClient()
	for _, path := range []string{"/", "/no-such-page", public.PathCharacters} {
		resp, err := hc.Get(e.PublicURL() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Strict-Transport-Security"); got != "max-age=31536000" {
			t.Fatalf("GET %s (%d): Strict-Transport-Security %q", path, resp.StatusCode, got)
		}
	}
	if v := metricValue(t, e.Edge, "mapyard_edge_http_redirects_total"); v != "3" {
		t.Fatalf("mapyard_edge_http_redirects_total = %q, want 3", v)
	}

	off := openHTTPSEdge(t, ca, "", func(c *edge.Config) { c.HSTSMaxAgeS = 0 })
	resp, err := hc.Get(off.PublicURL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Strict-Transport-Security"); got != "" {
		t.Fatalf("EDGE_HSTS_MAX_AGE_S=0: Strict-Transport-Security %q", got)
	}
}

// servedSerial is the serial number of the certificate the edge serves now.
func servedSerial(t testing.TB, ca *testCA, e *edge.Edge) string {
	t.Helper()
	c, err := tls.Dial("tcp", strings.TrimPrefix(e.PublicURL(), "https://"), ca.tlsConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestHTTPS_CertificateReload: new certificate files are served from the next
// handshake, with no restart and players connected before going on; a pair that does
// not load (key of another certificate, an expired certificate, a file half written)
// is refused with an error in the log and a count, and the previous one keeps serving.
func TestHTTPS_CertificateReload(t *testing.T) {
	ca := newTestCA(t)
	srv := ws.NewServer(benchGame{}, slog.New(slog.DiscardHandler))
	game := gameListener(t, srv)
	e := openHTTPSEdge(t, ca, newFakeOrch(t, ready("forest-1", portOf(t, game))).URL, nil)
	p := startPlaying(t, ca.dialer(), wsURL(e.Edge, "forest-1"))
	first := servedSerial(t, ca, e.Edge)
	refused := `mapyard_edge_tls_cert_reloads_total{result="refused"}`
	loaded := `mapyard_edge_tls_cert_reloads_total{result="loaded"}`

	_, otherKey, _ := ca.issue(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), testHost)
	newCert, newKey, newLeaf := ca.issue(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), testHost)
	expiredCert, expiredKey, _ := ca.issue(t, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour), testHost)
	for i, bad := range []struct {
		name      string
		cert, key []byte
	}{
		{"KeyOfAnotherCertificate", newCert, otherKey},
		{"Expired", expiredCert, expiredKey},
		{"HalfWritten", newCert[:len(newCert)/2], newKey},
	} {
		t.Run(bad.name, func(t *testing.T) {
			writeFile(t, e.keyFile, bad.key)
			writeFile(t, e.certFile, bad.cert)
			waitFor(t, "the refusal", func() bool { return metricValue(t, e.Edge, refused) == strconv.Itoa(i+1) })
			if got := servedSerial(t, ca, e.Edge); got != first {
				t.Fatalf("serving certificate %s after a refused pair, want the previous one, %s", got, first)
			}
			if n := len(e.log.lines("the certificate files changed but do not load; still serving the previous certificate")); n != i+1 {
				t.Fatalf("%d error lines for %d refused pairs", n, i+1)
			}
			p.check(t)
		})
	}
	writeFile(t, e.certFile, newCert)
	writeFile(t, e.keyFile, newKey)
	waitFor(t, "the new certificate", func() bool { return metricValue(t, e.Edge, loaded) == "1" })
	if got := servedSerial(t, ca, e.Edge); got != newLeaf.SerialNumber.String() {
		t.Fatalf("serving certificate %s, want the new one, %s", got, newLeaf.SerialNumber)
	}
	if n := len(e.log.lines("certificate reloaded from files")); n != 1 {
		t.Fatalf("%d reload lines", n)
	}
	v := metricValue(t, e.Edge, `mapyard_edge_tls_cert_expiry_timestamp_seconds{name="`+testHost+`"}`)
	if f, _ := strconv.ParseFloat(v, 64); int64(f) != newLeaf.NotAfter.Unix() {
		t.Fatalf("expiry metric %q, want %d", v, newLeaf.NotAfter.Unix())
	}
	p.check(t) // connected before the change, on the old certificate
	startPlaying(t, ca.dialer(), wsURL(e.Edge, "forest-1")).check(t)
}

// handshakeErrors is the edge's count of handshakes refused for reason.
func handshakeErrors(t testing.TB, e *edge.Edge, reason string) int {
	t.Helper()
	v := metricValue(t, e, `mapyard_edge_tls_handshake_errors_total{reason="`+reason+`"}`)
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("mapyard_edge_tls_handshake_errors_total{reason=%q} = %q", reason, v)
	}
	return n
}

// TestHTTPS_BadInput: what is no player's TLS handshake (an HTTP request on the HTTPS
// port, a scanner's bytes, a protocol too old, a host name the edge has no
// certificate for, a client hello of 64 KB, a client that says nothing) is refused
// cleanly, counted by reason and logged, while a player plays on, unaffected.
func TestHTTPS_BadInput(t *testing.T) {
	ca := newTestCA(t)
	srv := ws.NewServer(benchGame{}, slog.New(slog.DiscardHandler))
	game := gameListener(t, srv)
	e := openHTTPSEdge(t, ca, newFakeOrch(t, ready("forest-1", portOf(t, game))).URL, func(c *edge.Config) { c.TLSHandshakeTimeoutMS = 300 })
	addr := strings.TrimPrefix(e.PublicURL(), "https://")
	p := startPlaying(t, ca.dialer(), wsURL(e.Edge, "forest-1"))
	p.check(t)

	// send writes b to a fresh connection and returns what the edge answered before
	// it closed the connection.
	send := func(t *testing.T, b []byte, gone bool) string {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if len(b) > 0 {
			if _, err := c.Write(b); err != nil {
				t.Fatal(err)
			}
		}
		if gone {
			_ = c.(*net.TCPConn).CloseWrite()
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, _ := io.ReadAll(c)
		return string(got)
	}
	handshake := func(cfg *tls.Config) error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if err == nil {
			c.Close()
		}
		return err
	}
	for _, tc := range []struct {
		name, reason string
		try          func(t *testing.T)
	}{
		{"PlaintextHTTP", "plaintext_http", func(t *testing.T) {
			got := send(t, []byte("GET / HTTP/1.1\r\nHost: "+testHost+"\r\n\r\n"), false)
			if !strings.HasPrefix(got, "HTTP/1.1 400 Bad Request") || !strings.Contains(got, "HTTP request to an HTTPS server") {
				t.Fatalf("plain HTTP on the HTTPS port got %q", got)
			}
		}},
		{"ScannerBytes", "not_tls", func(t *testing.T) {
			if got := send(t, []byte("SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n"), false); got != "" {
				t.Fatalf("a scanner got %q", got)
			}
		}},
		{"TLS11Only", "protocol", func(t *testing.T) {
			cfg := ca.tlsConfig()
			cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
			if err := handshake(cfg); err == nil || !strings.Contains(err.Error(), "protocol version") {
				t.Fatalf("a TLS 1.1 client: %v", err)
			}
		}},
		{"UnknownHost", "unknown_host", func(t *testing.T) {
			cfg := ca.tlsConfig()
			cfg.ServerName = "other.mapyard.test"
			if err := handshake(cfg); err == nil || !strings.Contains(err.Error(), "unrecognized name") {
				t.Fatalf("another host name: %v, want unrecognized name", err)
			}
		}},
		{"ClientHello64KB", "client_hello_too_large", func(t *testing.T) {
			cfg := ca.tlsConfig()
			for i := range 240 { // 240 protocol names of 255 bytes: a client hello of about 63 KiB
				cfg.NextProtos = append(cfg.NextProtos, fmt.Sprintf("%03d", i)+strings.Repeat("x", 252))
			}
			if err := handshake(cfg); err == nil {
				t.Fatal("a 64 KB client hello was taken")
			}
		}},
		{"HelloThenGone", "eof", func(t *testing.T) {
			if got := send(t, []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03}, true); got != "" {
				t.Fatalf("a cut hello got %q", got)
			}
		}},
		{"Silent", "timeout", func(t *testing.T) {
			if got := send(t, nil, false); got != "" {
				t.Fatalf("a silent client got %q", got)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := handshakeErrors(t, e.Edge, tc.reason)
			tc.try(t)
			waitFor(t, "the refusal's count", func() bool { return handshakeErrors(t, e.Edge, tc.reason) == before+1 })
			p.check(t)
		})
	}
	var reasons []string
	for _, l := range e.log.lines("TLS handshakes refused") {
		reasons = append(reasons, fmt.Sprint(l["reason"]))
	}
	if len(reasons) != 7 {
		t.Fatalf("logged refusals %v, want one line for each reason", reasons)
	}
	if n := srv.Active(); n != 1 {
		t.Fatalf("the map serves %d players, want the one playing", n)
	}
}

// TestHTTPS_ClientRefusesCertificate: a client refuses a certificate for another name
// than it dialled, one of an authority it does not trust, and one that expired while
// the edge served it; the edge counts each refusal (bad_certificate) and warns once
// in its log, since players cannot connect.
func TestHTTPS_ClientRefusesCertificate(t *testing.T) {
	ca := newTestCA(t)
	e := openHTTPSEdge(t, ca, "", nil)
	addr := strings.TrimPrefix(e.PublicURL(), "https://")
	dial := func(cfg *tls.Config) error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if err == nil {
			c.Close()
		}
		return err
	}
	refusedBy := func(t *testing.T, cfg *tls.Config, check func(error) bool) {
		t.Helper()
		before := handshakeErrors(t, e.Edge, "bad_certificate")
		err := dial(cfg)
		if err == nil || !check(err) {
			t.Fatalf("the client's handshake: %v", err)
		}
		waitFor(t, "the edge to count the refusal", func() bool { return handshakeErrors(t, e.Edge, "bad_certificate") == before+1 })
	}
	t.Run("WrongHost", func(t *testing.T) {
		// Dialled by address: no server name is sent, the edge serves its certificate,
		// which names testHost only.
		refusedBy(t, &tls.Config{RootCAs: ca.pool}, func(err error) bool {
			var h x509.HostnameError
			return errors.As(err, &h)
		})
	})
	t.Run("UnknownAuthority", func(t *testing.T) {
		refusedBy(t, &tls.Config{RootCAs: x509.NewCertPool(), ServerName: testHost}, func(err error) bool {
			var u x509.UnknownAuthorityError
			return errors.As(err, &u)
		})
	})
	t.Run("Expired", func(t *testing.T) {
		certPEM, keyPEM, leaf := ca.issue(t, time.Now().Add(-time.Hour), time.Now().Add(1500*time.Millisecond), testHost)
		writeFile(t, e.keyFile, keyPEM)
		writeFile(t, e.certFile, certPEM)
		waitFor(t, "the short-lived certificate", func() bool { return servedSerial(t, ca, e.Edge) == leaf.SerialNumber.String() })
		waitFor(t, "the certificate to expire", func() bool { return time.Now().After(leaf.NotAfter) })
		refusedBy(t, ca.tlsConfig(), func(err error) bool {
			var c x509.CertificateInvalidError
			return errors.As(err, &c) && c.Reason == x509.Expired
		})
	})
	var warned []string
	for _, l := range e.log.lines("TLS handshakes refused") {
		if l["reason"] == "bad_certificate" {
			warned = append(warned, fmt.Sprint(l["level"]))
		}
	}
	if len(warned) != 1 || warned[0] != "WARN" {
		t.Fatalf("refused certificates logged at %v, want one warning (a line a minute at most)", warned)
	}
}

// TestHTTPS_Handover: an edge serving HTTPS and the plain HTTP listener hands both to
// the edge that replaces it, with the metrics listener; after the old edge is gone,
// the same addresses serve HTTPS and redirect.
func TestHTTPS_Handover(t *testing.T) {
	ca := newTestCA(t)
	sock := filepath.Join(t.TempDir(), "edge.sock")
	tune := func(c *edge.Config) { c.HTTPAddr, c.HandoverSocket, c.StaticRoutes = "127.0.0.1:0", sock, "forest-1=1" }
	old := openHTTPSEdge(t, ca, "", tune)
	publicURL, httpURL := old.PublicURL(), old.HTTPURL()
	next := MustOpenEdgeLog(t, "", slog.New(slog.DiscardHandler), func(c *edge.Config) {
		tune(c)
		c.TLSCertFile, c.TLSKeyFile, c.TLSReloadMS, c.TLSHandshakeTimeoutMS = old.certFile, old.keyFile, 100, 2000
	})
	select {
	case <-old.HandedOver():
	case <-time.After(10 * time.Second):
		t.Fatal("the old edge did not hand over")
	}
	if next.PublicURL() != publicURL || next.HTTPURL() != httpURL {
		t.Fatalf("the new edge serves %s and %s, want the old edge's %s and %s", next.PublicURL(), next.HTTPURL(), publicURL, httpURL)
	}
	if err := old.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	resp, err := ca.httpsClient().Get(publicURL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTPS after the handover: %d", resp.StatusCode)
	}
	plain := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = plain.Get(httpURL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusPermanentRedirect {
		t.Fatalf("plain HTTP after the handover: %d", resp.StatusCode)
	}
	if v := metricValue(t, next, "mapyard_edge_tls_handshakes_total"); v != "1" {
		t.Fatalf("the new edge completed %q handshakes, want the one after the handover", v)
	}
}
