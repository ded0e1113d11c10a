package edge_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mapyard/mapyard/orchestrator/edge"
	"github.com/mapyard/mapyard/orchestrator/edge/acmetest"
)

// acmeEdge opens an edge that gets its certificate for testHost from the local ACME CA,
// keeping it in dir.
func acmeEdge(t *testing.T, ca *acmetest.CA, dir string, logs *logBuffer, tune func(*edge.Config)) *edge.Edge {
	t.Helper()
	cfg := edge.Config{PublicAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", OrchURL: "http://127.0.0.1:1",
		Credential: secret, StaticRoutes: "forest-1=1", MaxConns: 10, Procs: 1, IdleTimeoutMS: 60000, WriteTimeoutMS: 5000,
		DrainTimeoutMS: 1000, LogLevel: "debug", ACMEDomains: []string{testHost}, ACMEEmail: "host@mapyard.test",
		ACMEDirectory: ca.Directory, ACMECacheDir: dir, HSTSMaxAgeS: 60, TLSHandshakeTimeoutMS: 10000}
	if tune != nil {
		tune(&cfg)
	}
	e, err := edge.New(cfg, logs.logger())
	if err != nil {
		t.Fatal(err)
	}
	e.ACMEHTTPClient = ca.Client
	if err := e.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(t.Context()) })
	return e
}

// obtained waits for the edge to log that it serves its certificate for testHost.
func obtained(t *testing.T, logs *logBuffer, ca *acmetest.CA) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for len(logs.lines("serving HTTPS with the ACME certificate")) == 0 {
		if failed := logs.lines("no certificate from the ACME CA; HTTPS for this name fails until it comes (asked again at the next handshake)"); len(failed) > 0 {
			t.Fatalf("the edge got no certificate: %v\npebble: %s", failed[0]["err"], ca.Log())
		}
		if time.Now().After(deadline) {
			t.Fatalf("no certificate within a minute\npebble: %s", ca.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// verifiedBy dials the edge as testHost, verifying its chain against roots, and
// returns the leaf.
func verifiedBy(t *testing.T, e *edge.Edge, roots *x509.CertPool) *x509.Certificate {
	t.Helper()
	c, err := tls.Dial("tcp", strings.TrimPrefix(e.PublicURL(), "https://"), &tls.Config{RootCAs: roots, ServerName: testHost})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0]
}

// TestACME_TLSALPN01 gets the edge's certificate from a local ACME CA through the
// TLS-ALPN-01 challenge, answered on the HTTPS listener itself (no plain HTTP
// listener: no HTTP-01), keeps it in the cache directory, and serves it; an edge that
// starts again serves it from the cache, asking the CA for nothing. Names the edge has
// no certificate for are refused.
func TestACME_TLSALPN01(t *testing.T) {
	ca := acmetest.New(t)
	dir := filepath.Join(t.TempDir(), "certs")
	logs := &logBuffer{}
	e := acmeEdge(t, ca, dir, logs, nil)
	ca.Validate(acmetest.ClosedPort(t), portOfURL(t, e.PublicURL()))
	obtained(t, logs, ca)
	leaf := verifiedBy(t, e, ca.Roots)
	if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != testHost {
		t.Fatalf("certificate for %v", leaf.DNSNames)
	}
	if len(logs.lines("answered an ACME TLS-ALPN-01 validation")) == 0 || ca.ValidatedOverHTTP() {
		t.Fatalf("the CA did not validate over TLS-ALPN-01 alone:\n%s", ca.Log())
	}
	if len(logs.lines("ACME certificate obtained")) != 1 {
		t.Fatal("the edge did not log the certificate it obtained")
	}
	if v := metricValue(t, e, `mapyard_edge_acme_certificates_total{result="obtained"}`); v != "1" {
		t.Fatalf(`mapyard_edge_acme_certificates_total{result="obtained"} = %q`, v)
	}
	if v := metricValue(t, e, `mapyard_edge_tls_cert_expiry_timestamp_seconds{name="`+testHost+`"}`); v == "" {
		t.Fatal("no expiry metric for the ACME certificate")
	}
	if _, err := os.Stat(filepath.Join(dir, testHost)); err != nil {
		t.Fatalf("the certificate is not in the cache directory: %v", err)
	}
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Roots, ServerName: testHost}}}).Get(e.PublicURL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Strict-Transport-Security") != "max-age=60" {
		t.Fatalf("GET / over HTTPS: %d, HSTS %q", resp.StatusCode, resp.Header.Get("Strict-Transport-Security"))
	}

	for _, tc := range []struct{ name, serverName, reason string }{
		{"OtherHost", "other.mapyard.test", "unknown_host"},
		{"NoServerName", "", "no_server_name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &tls.Config{RootCAs: ca.Roots, ServerName: tc.serverName, InsecureSkipVerify: tc.serverName == ""}
			c, err := tls.Dial("tcp", strings.TrimPrefix(e.PublicURL(), "https://"), cfg)
			if err == nil {
				c.Close()
				t.Fatal("the handshake completed")
			}
			if !strings.Contains(err.Error(), "unrecognized name") {
				t.Fatalf("the client was told %v, want unrecognized name", err)
			}
			waitFor(t, "the refusal's count", func() bool { return handshakeErrors(t, e, tc.reason) == 1 })
		})
	}

	issued := ca.Issued()
	e.Close(t.Context())
	again := acmeEdge(t, ca, dir, &logBuffer{}, nil)
	if got := verifiedBy(t, again, ca.Roots); !got.Equal(leaf) {
		t.Fatal("an edge that started again serves another certificate than the cached one")
	}
	if n := ca.Issued(); n != issued {
		t.Fatalf("the CA issued %d certificates more for an edge whose cache holds one", n-issued)
	}
}

// TestACME_HTTP01 gets the edge's certificate through the HTTP-01 challenge, answered
// on the plain HTTP listener (EDGE_HTTP_ADDR), after TLS-ALPN-01 failed (the CA
// validates TLS-ALPN-01 at a port where nothing listens); every other request to the
// plain listener is redirected to HTTPS.
func TestACME_HTTP01(t *testing.T) {
	ca := acmetest.New(t)
	logs := &logBuffer{}
	e := acmeEdge(t, ca, filepath.Join(t.TempDir(), "certs"), logs, func(c *edge.Config) { c.HTTPAddr = "127.0.0.1:0" })
	ca.Validate(portOfURL(t, e.HTTPURL()), acmetest.ClosedPort(t))
	obtained(t, logs, ca)
	verifiedBy(t, e, ca.Roots)
	if !ca.ValidatedOverHTTP() || len(logs.lines("answered an ACME TLS-ALPN-01 validation")) != 0 {
		t.Fatalf("the CA did not validate over HTTP-01 alone:\n%s", ca.Log())
	}
	req, _ := http.NewRequest(http.MethodGet, e.HTTPURL()+"/?x=1", nil)
	req.Host = testHost
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if want := "https://" + testHost + ":" + strconv.Itoa(portOfURL(t, e.PublicURL())) + "/?x=1"; resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
		t.Fatalf("plain HTTP: %d to %q, want 308 to %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
}

// portOfURL is the port of a base URL.
func portOfURL(t *testing.T, u string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(u[strings.Index(u, "://")+3:])
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}
