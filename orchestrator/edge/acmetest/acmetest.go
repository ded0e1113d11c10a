// Package acmetest is a local ACME CA for tests: Let's Encrypt's test CA, pebble, run in
// the test's process. Its directory is served at once on a TLS server of the test's
// (so that an edge can be configured with it), and it answers once Validate says at
// which ports the edge answers challenges: HTTP-01 on its plain HTTP listener,
// TLS-ALPN-01 on its HTTPS listener. Its validation authority resolves every name to
// 127.0.0.1 through a DNS server of the test's own, and issues real certificates from
// a root of its own (Roots) through real challenges. Test code only.
package acmetest

import (
	"crypto/x509"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"
)

// CA is a running pebble. Directory and Client are set by New; Roots, which its
// certificates chain to, by Validate.
type CA struct {
	// Directory is the ACME directory URL (EDGE_ACME_DIRECTORY).
	Directory string
	// Client trusts the directory's server: the edge's ACMEHTTPClient.
	Client *http.Client
	// Roots holds the root the issued certificates chain to.
	Roots *x509.CertPool

	log      *buffer
	resolver string
	ready    chan struct{}
	handler  http.Handler
}

// New starts the directory's server and the DNS server; the CA answers requests once
// Validate was called. It sets pebble's environment for a test (no random wait before
// a validation, no nonce refused at random), so the test cannot be parallel.
func New(tb testing.TB) *CA {
	tb.Helper()
	tb.Setenv("PEBBLE_VA_NOSLEEP", "1")
	tb.Setenv("PEBBLE_WFE_NONCEREJECT", "0")
	c := &CA{log: &buffer{}, ready: make(chan struct{}), resolver: fakeDNS(tb)}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-c.ready
		if id, ok := strings.CutPrefix(r.URL.Path, "/finalize-order/"); ok {
			// Let's Encrypt answers a finalize with the order's Location, which
			// golang.org/x/crypto/acme follows while the order is processing; pebble
			// does not.
			w.Header().Set("Location", "https://"+r.Host+"/my-order/"+id)
		}
		c.handler.ServeHTTP(w, r)
	}))
	tb.Cleanup(func() {
		select {
		case <-c.ready:
		default:
			c.handler = http.NotFoundHandler() // requests waiting for a CA that never came fail now
			close(c.ready)
		}
		srv.Close()
	})
	c.Directory, c.Client = srv.URL+wfe.DirectoryPath, srv.Client()
	return c
}

// Validate starts the CA proper: its validation authority asks HTTP-01 challenges at
// httpPort and TLS-ALPN-01 challenges at tlsPort (a port where nothing listens makes
// that challenge fail).
func (c *CA) Validate(httpPort, tlsPort int) {
	logger := log.New(c.log, "pebble ", log.Lmicroseconds)
	store := db.NewMemoryStore()
	authority := ca.New(logger, store, "", "ecdsa", 0, 1, map[string]ca.Profile{"default": {Description: "the default profile"}})
	validator := va.New(logger, httpPort, tlsPort, false, c.resolver, store)
	front := wfe.New(logger, store, validator, authority, []string{"pebble.letsencrypt.org"}, false, false, 1, 1)
	c.Roots = x509.NewCertPool()
	c.Roots.AddCert(authority.GetRootCert(0).Cert)
	c.handler = front.Handler()
	close(c.ready)
}

// Log is what pebble logged: its requests, validations and issuances.
func (c *CA) Log() string { return c.log.String() }

// Issued is how many certificates the CA issued.
func (c *CA) Issued() int { return strings.Count(c.Log(), "Issued certificate") }

// ValidatedOverHTTP says whether the CA asked an HTTP-01 challenge (it logs those; a
// TLS-ALPN-01 validation shows in the edge's log instead).
func (c *CA) ValidatedOverHTTP() bool { return strings.Contains(c.Log(), "validate w/ HTTP") }

// ClosedPort is a loopback port where nothing listens: a challenge asked there fails.
func ClosedPort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// fakeDNS answers every A question with 127.0.0.1 (and nothing else), over TCP as
// pebble asks; it returns its address.
func fakeDNS(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &dns.Server{Listener: ln, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		for _, q := range r.Question {
			if q.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.IPv4(127, 0, 0, 1)})
			}
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	tb.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}

// buffer is pebble's log.
type buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
