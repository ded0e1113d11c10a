package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/edge"
	"github.com/mapyard/mapyard/orchestrator/edge/acmetest"
)

// TestPage_PlaysOverHTTPS plays the browser client in Chromium over https:// and wss://
// against the edge, the real orchestrator and a real map container, the edge serving
// the certificate a local ACME CA (pebble, in the test's process) issued it through
// TLS-ALPN-01. Chromium trusts that certificate's key alone
// (--ignore-certificate-errors-spki-list) and finds the certificate's name at the edge
// (--host-resolver-rules). The first load comes through the plain HTTP listener's
// redirect to HTTPS; the page dials its map's WebSocket with wss://; and once the page
// came over HTTPS with Strict-Transport-Security, Chromium asks HTTPS of the plain
// listener's address too, which then sees no plain request again.
func TestPage_PlaysOverHTTPS(t *testing.T) {
	const host = "play.mapyard.test"
	chromium := findChromium(t)
	cli := dockertest.Client(t)
	deployment := "hs-" + randomHex(t, 4)
	t.Cleanup(func() { dockertest.RemoveDeployment(t, cli, deployment) })
	secret := randomHex(t, 16)
	child := startOrchestrator(t, childEnv(deployment, "127.0.0.1:0", filepath.Join(t.TempDir(), "mapyard.db"), secret,
		"ORCH_DEFAULT_INSTANCE_ID="+deployment, "ORCH_WARM_POOL_SIZE=0"))
	waitStatus(t, child.public+"/readyz", http.StatusOK, 60*time.Second)

	ca := acmetest.New(t)
	e, err := edge.New(edge.Config{PublicAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		OrchURL: child.control, CredentialFile: child.edgeCredential, MaxConns: 100, Procs: 1, IdleTimeoutMS: 60000,
		WriteTimeoutMS: 5000, DrainTimeoutMS: 1000, LogLevel: "info", ACMEDomains: []string{host}, ACMEDirectory: ca.Directory,
		ACMECacheDir: t.TempDir(), HSTSMaxAgeS: 3600, TLSHandshakeTimeoutMS: 10000}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	e.Static, e.ACMEHTTPClient = pageFiles(t), ca.Client
	if err := e.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(t.Context()) })
	publicPort, httpPort := urlPort(t, e.PublicURL()), urlPort(t, e.HTTPURL())
	ca.Validate(acmetest.ClosedPort(t), publicPort)
	waitStatus(t, e.MetricsURL()+"/readyz", http.StatusOK, 60*time.Second)
	leaf := issued(t, e.PublicURL(), host, ca.Roots)
	spki := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)

	ctx := browser(t, chromium,
		chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(spki[:])),
		chromedp.Flag("host-resolver-rules", "MAP "+host+" 127.0.0.1"))
	p := &page{t: t, ctx: ctx, shots: screenshotDir(t)}
	plainURL := "http://" + host + ":" + strconv.Itoa(httpPort) + "/"
	httpsURL := "https://" + host + ":" + strconv.Itoa(publicPort) + "/"
	p.run(chromedp.Navigate(plainURL))
	p.started(httpsURL)
	var href string
	p.eval(`location.href`, &href)
	if href != httpsURL {
		t.Fatalf("the plain listener's redirect led to %s, want %s", href, httpsURL)
	}
	p.wait("the menu", `mapyardDebug.state === "menu"`)
	p.run(chromedp.Click(chromedp.CSS("#play")))
	p.wait("playing over wss://", `mapyardDebug.state === "playing" && mapyardDebug.frames > 2 && mapyardDebug.session.predicted !== null`)
	var ws string
	p.eval(`mapyardDebug.session.ws.url`, &ws)
	if want := "wss://" + host + ":" + strconv.Itoa(publicPort) + "/maps/"; !strings.HasPrefix(ws, want) {
		t.Fatalf("the page dialled %s, want %s...", ws, want)
	}
	p.walk("KeyD", 2)
	if n := p.screenshot("https"); n < 16 {
		t.Fatalf("the canvas shows %d colours: the world was not drawn", n)
	}

	if got := metric(t, e.MetricsURL(), "mapyard_edge_http_redirects_total"); got != "1" {
		t.Fatalf("the plain listener redirected %s requests, want the first load's", got)
	}
	// Strict-Transport-Security: Chromium now asks for the plain listener's address
	// over HTTPS itself (which that listener does not speak), without a plain request.
	nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	navErr := chromedp.Do(nctx, chromedp.Navigate(plainURL))
	cancel()
	if got := metric(t, e.MetricsURL(), "mapyard_edge_http_redirects_total"); got != "1" {
		t.Fatalf("after HSTS the plain listener still got a plain request (%s redirects; navigation: %v)", got, navErr)
	}
	if navErr == nil || !strings.Contains(navErr.Error(), "SSL") {
		t.Fatalf("navigating to %s after HSTS: %v, want Chromium's TLS error on the plain port", plainURL, navErr)
	}
	t.Logf("after HSTS, %s: %v", plainURL, navErr)
}

// issued waits until the edge at base serves a certificate for host that roots
// verify, and returns it.
func issued(t *testing.T, base, host string, roots *x509.CertPool) *x509.Certificate {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := tls.Dial("tcp", strings.TrimPrefix(base, "https://"), &tls.Config{RootCAs: roots, ServerName: host})
		if err == nil {
			defer c.Close()
			return c.ConnectionState().PeerCertificates[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no certificate for %s within a minute: %v", host, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// urlPort is the port of a base URL.
func urlPort(t *testing.T, u string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(u[strings.Index(u, "://")+3:])
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

// metric is the value of the unlabelled series name at a metrics listener.
func metric(t *testing.T, base, name string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}
