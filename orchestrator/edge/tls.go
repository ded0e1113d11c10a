package edge

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"

	"github.com/mapyard/mapyard/mapserver/kernel/envconf"

	// The image is built on scratch, with no CA bundle: the ACME client trusts these
	// roots when the host has none (x509.SetFallbackRoots), and the host's otherwise.
	_ "golang.org/x/crypto/x509roots/fallback"
)

// HTTPS at the public listener (docs/security.md, "HTTPS"). The certificate comes
// from files (fileCerts, read again when they change) or from an ACME CA (acmeCerts,
// through golang.org/x/crypto/acme/autocert); tlsListener (tlslisten.go) completes
// every handshake before the HTTP server sees the connection, and the epoll engine
// carries the players' WebSockets on with TLS in its own loop (epolltls_linux.go).

// Reasons a TLS handshake is refused (mapyard_edge_tls_handshake_errors_total{reason}).
const (
	tlsNotTLS         = "not_tls"                // the first bytes are no TLS handshake
	tlsPlainHTTP      = "plaintext_http"         // an HTTP request on the HTTPS port: answered 400
	tlsHelloTooLarge  = "client_hello_too_large" // a client hello beyond maxClientHello
	tlsTimeout        = "timeout"                // no complete handshake within the handshake timeout
	tlsEOF            = "eof"                    // the client went away during the handshake
	tlsUnknownHost    = "unknown_host"           // a server name the edge has no certificate for
	tlsNoServerName   = "no_server_name"         // ACME: a hello naming no host
	tlsNoCertificate  = "no_certificate"         // ACME: the CA did not issue (yet)
	tlsBadCertificate = "bad_certificate"        // the client refused the edge's certificate
	tlsClientAlert    = "client_alert"           // the client ended the handshake with another alert
	tlsProtocol       = "protocol"               // no common version or cipher, a malformed message
	tlsBusy           = "busy"                   // maxHandshakes handshakes were under way
)

var tlsReasons = []string{tlsNotTLS, tlsPlainHTTP, tlsHelloTooLarge, tlsTimeout, tlsEOF, tlsUnknownHost, tlsNoServerName,
	tlsNoCertificate, tlsBadCertificate, tlsClientAlert, tlsProtocol, tlsBusy}

// tlsMetrics are the series of HTTPS, registered when it is on.
type tlsMetrics struct {
	handshakes prometheus.Counter
	errors     *prometheus.CounterVec
	reloads    *prometheus.CounterVec
	expiry     *prometheus.GaugeVec
	acme       *prometheus.CounterVec
	redirects  prometheus.Counter
}

func newTLSMetrics(reg prometheus.Registerer) *tlsMetrics {
	m := &tlsMetrics{
		handshakes: prometheus.NewCounter(prometheus.CounterOpts{Name: "mapyard_edge_tls_handshakes_total",
			Help: "TLS handshakes completed on the public listener."}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mapyard_edge_tls_handshake_errors_total",
			Help: "Connections to the public listener dropped before their TLS handshake completed, by reason."}, []string{"reason"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mapyard_edge_tls_cert_reloads_total",
			Help: "Changes of the certificate files (EDGE_TLS_CERT_FILE, EDGE_TLS_KEY_FILE), by result: loaded, or refused (the previous certificate keeps serving)."}, []string{"result"}),
		expiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "mapyard_edge_tls_cert_expiry_timestamp_seconds",
			Help: "When the certificate served for a name expires (Unix time)."}, []string{"name"}),
		acme: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mapyard_edge_acme_certificates_total",
			Help: "Certificates asked of the ACME CA, by result: obtained (new or renewed), or failed."}, []string{"result"}),
		redirects: prometheus.NewCounter(prometheus.CounterOpts{Name: "mapyard_edge_http_redirects_total",
			Help: "Requests to the plain HTTP listener (EDGE_HTTP_ADDR) redirected to HTTPS."}),
	}
	for _, r := range tlsReasons {
		m.errors.WithLabelValues(r)
	}
	m.reloads.WithLabelValues("loaded")
	m.reloads.WithLabelValues("refused")
	reg.MustRegister(m.handshakes, m.errors, m.reloads, m.expiry, m.acme, m.redirects)
	return m
}

// certSource gives the certificate for a client hello, or an error saying why there is
// none (a reasonError carries the metric's reason).
type certSource interface {
	certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error)
}

// reasonError is a refusal of the certificate source, with its metric reason.
type reasonError struct {
	reason string
	err    error
}

func (e *reasonError) Error() string { return e.err.Error() }
func (e *reasonError) Unwrap() error { return e.err }

func refuseHello(reason, format string, args ...any) error {
	return &reasonError{reason: reason, err: fmt.Errorf(format, args...)}
}

// newTLSConfig is the public listener's TLS configuration: TLS 1.2 and newer with Go's
// cipher suites and key exchanges, HTTP/1.1 only (a WebSocket is an HTTP/1.1 upgrade,
// and the page's few files gain nothing from HTTP/2), and acme-tls/1 when the
// certificates come from an ACME CA (TLS-ALPN-01 challenges).
func newTLSConfig(src certSource, acmeOn bool) *tls.Config {
	protos := []string{"http/1.1"}
	if acmeOn {
		protos = append(protos, acme.ALPNProto)
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: protos,
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			c, err := src.certificate(hello)
			if err == nil {
				return c, nil
			}
			reason := tlsNoCertificate
			if re, ok := errors.AsType[*reasonError](err); ok {
				reason = re.reason
			}
			if t, ok := hello.Conn.(*clientTransport); ok {
				t.reason, t.refusal = reason, err
			}
			if reason == tlsUnknownHost || reason == tlsNoServerName {
				// No certificate at all: the client is told unrecognized_name, not
				// an internal error.
				return nil, nil
			}
			return nil, err
		},
	}
}

// fileCerts serves the certificate of EDGE_TLS_CERT_FILE and EDGE_TLS_KEY_FILE and
// reads the files again every interval: a changed pair that loads replaces the
// certificate for the handshakes that follow (established connections keep theirs); one
// that does not is refused, logged and counted, and the previous one keeps serving.
// A host that writes the two files one after the other may be seen between the two
// writes: that pair is refused, and the next look, after the second write, loads it.
type fileCerts struct {
	certFile, keyFile string
	log               *slog.Logger
	metrics           *tlsMetrics

	cur       atomic.Pointer[tls.Certificate]
	sum       [sha256.Size]byte // of the pair last looked at, loaded or refused
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// openFileCerts loads the pair; an error here stops the edge from starting.
func openFileCerts(certFile, keyFile string, log *slog.Logger, m *tlsMetrics) (*fileCerts, error) {
	f := &fileCerts{certFile: certFile, keyFile: keyFile, log: log, metrics: m}
	c, sum, err := f.load()
	if err != nil {
		return nil, fmt.Errorf("EDGE_TLS_CERT_FILE %s, EDGE_TLS_KEY_FILE %s: %w", certFile, keyFile, err)
	}
	f.cur.Store(c)
	f.sum = sum
	m.expiry.WithLabelValues(certName(c.Leaf)).Set(float64(c.Leaf.NotAfter.Unix()))
	log.Info("serving HTTPS with the certificate from files", "names", certNames(c.Leaf), "notAfter", c.Leaf.NotAfter, "cert", certFile)
	return f, nil
}

// readPair reads one file of the pair; one the edge may not read says which user it
// runs as, at start and on every reload alike.
func readPair(name string) ([]byte, error) {
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrPermission) {
		err = fmt.Errorf("%w (the edge runs as user %d: give it read access, e.g. chgrp %d on the key and mode 0640)", err, os.Getuid(), os.Getgid())
	}
	return b, err
}

// load reads and checks the pair: it parses, the key is the certificate's, and the
// certificate is valid now.
func (f *fileCerts) load() (*tls.Certificate, [sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	certPEM, err := readPair(f.certFile)
	if err != nil {
		return nil, sum, err
	}
	keyPEM, err := readPair(f.keyFile)
	if err != nil {
		return nil, sum, err
	}
	h := sha256.New()
	h.Write(certPEM)
	h.Write([]byte{0})
	h.Write(keyPEM)
	copy(sum[:], h.Sum(nil))
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, sum, err
	}
	now := time.Now()
	switch {
	case now.After(c.Leaf.NotAfter):
		return nil, sum, fmt.Errorf("the certificate of %s expired at %s", certName(c.Leaf), c.Leaf.NotAfter.Format(time.RFC3339))
	case now.Before(c.Leaf.NotBefore):
		return nil, sum, fmt.Errorf("the certificate of %s is not valid before %s", certName(c.Leaf), c.Leaf.NotBefore.Format(time.RFC3339))
	}
	return &c, sum, nil
}

// watch looks at the files every interval until close.
func (f *fileCerts) watch(interval time.Duration) {
	f.stop, f.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(f.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-t.C:
				f.reload()
			}
		}
	}()
}

// reload loads the pair when it changed since it was last looked at.
func (f *fileCerts) reload() {
	c, sum, err := f.load()
	if sum == f.sum {
		return
	}
	f.sum = sum
	if err != nil {
		f.metrics.reloads.WithLabelValues("refused").Inc()
		old := f.cur.Load()
		f.log.Error("the certificate files changed but do not load; still serving the previous certificate",
			"err", err, "cert", f.certFile, "key", f.keyFile, "serving", certNames(old.Leaf), "servingNotAfter", old.Leaf.NotAfter)
		return
	}
	old := f.cur.Swap(c)
	f.metrics.reloads.WithLabelValues("loaded").Inc()
	f.metrics.expiry.DeleteLabelValues(certName(old.Leaf))
	f.metrics.expiry.WithLabelValues(certName(c.Leaf)).Set(float64(c.Leaf.NotAfter.Unix()))
	f.log.Info("certificate reloaded from files", "names", certNames(c.Leaf), "notAfter", c.Leaf.NotAfter)
}

func (f *fileCerts) close() {
	if f.stop != nil {
		f.closeOnce.Do(func() { close(f.stop) })
		<-f.done
	}
}

// certificate serves the files' certificate to a hello that names one of its hosts or
// none (a client dialling an address); another name is refused, as with ACME, so that
// a client sent here by mistake fails at once rather than after a warning a user
// might click through.
func (f *fileCerts) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	c := f.cur.Load()
	if hello.ServerName != "" && c.Leaf.VerifyHostname(hello.ServerName) != nil {
		return nil, refuseHello(tlsUnknownHost, "no certificate for %q (the certificate names %v)", hello.ServerName, certNames(c.Leaf))
	}
	return c, nil
}

// acmeCerts gets certificates for its domains from an ACME CA, keeps them in its
// cache directory and renews them before they expire (autocert.Manager), answering
// TLS-ALPN-01 challenges on the public listener and, through httpHandler, HTTP-01
// challenges on the plain HTTP listener.
type acmeCerts struct {
	m       *autocert.Manager
	domains map[string]bool
	first   []string
	log     *slog.Logger
	metrics *tlsMetrics
	wg      sync.WaitGroup
}

func newACMECerts(cfg Config, client *http.Client, log *slog.Logger, m *tlsMetrics) (*acmeCerts, error) {
	if err := os.MkdirAll(cfg.ACMECacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("EDGE_ACME_CACHE_DIR=%s: %w", cfg.ACMECacheDir, err)
	}
	a := &acmeCerts{domains: map[string]bool{}, log: log, metrics: m}
	for _, d := range cfg.ACMEDomains {
		d = strings.ToLower(strings.TrimSuffix(d, "."))
		if !a.domains[d] {
			a.domains[d] = true
			a.first = append(a.first, d)
		}
	}
	a.m = &autocert.Manager{
		Prompt:     autocert.AcceptTOS,
		Cache:      &acmeCache{Cache: autocert.DirCache(cfg.ACMECacheDir), a: a},
		HostPolicy: autocert.HostWhitelist(a.first...),
		Email:      cfg.ACMEEmail,
		Client:     &acme.Client{DirectoryURL: cfg.ACMEDirectory, HTTPClient: client, UserAgent: "mapyard-edge/" + Version},
	}
	return a, nil
}

// certificate answers TLS-ALPN-01 challenges, and hellos naming one of the domains
// with its certificate, obtained at the first such hello if the cache has none.
func (a *acmeCerts) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := strings.ToLower(strings.TrimSuffix(hello.ServerName, "."))
	isChallenge := len(hello.SupportedProtos) == 1 && hello.SupportedProtos[0] == acme.ALPNProto
	switch {
	case name == "":
		return nil, refuseHello(tlsNoServerName, "the client hello names no host")
	case !a.domains[name]:
		return nil, refuseHello(tlsUnknownHost, "no certificate for %q (EDGE_ACME_DOMAINS: %v)", hello.ServerName, a.first)
	case isChallenge:
		return a.m.GetCertificate(hello)
	}
	c, err := a.m.GetCertificate(hello)
	if err != nil {
		return nil, refuseHello(tlsNoCertificate, "no certificate for %q yet: %w", name, err)
	}
	return c, nil
}

// prefetch asks for every domain's certificate in the background at start, so that
// the first player does not wait for the CA, and says in the log what it got.
func (a *acmeCerts) prefetch(ctx context.Context) {
	for _, d := range a.first {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			hello := &tls.ClientHelloInfo{ServerName: d, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
				SignatureSchemes: []tls.SignatureScheme{tls.ECDSAWithP256AndSHA256}, SupportedCurves: []tls.CurveID{tls.CurveP256}}
			done := make(chan struct{})
			var c *tls.Certificate
			var err error
			go func() { defer close(done); c, err = a.m.GetCertificate(hello) }()
			select {
			case <-ctx.Done():
				return
			case <-done:
			}
			if err != nil {
				a.metrics.acme.WithLabelValues("failed").Inc()
				a.log.Error("no certificate from the ACME CA; HTTPS for this name fails until it comes (asked again at the next handshake)",
					"name", d, "err", err)
				return
			}
			a.metrics.expiry.WithLabelValues(d).Set(float64(c.Leaf.NotAfter.Unix()))
			a.log.Info("serving HTTPS with the ACME certificate", "name", d, "notAfter", c.Leaf.NotAfter, "issuer", c.Leaf.Issuer.CommonName)
		}()
	}
}

// httpHandler answers ACME HTTP-01 challenges and passes every other request on.
func (a *acmeCerts) httpHandler(next http.Handler) http.Handler {
	h := a.m.HTTPHandler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if host, _, err := net.SplitHostPort(r.Host); err == nil && strings.HasPrefix(r.URL.Path, "/.well-known/acme-challenge/") {
			// autocert checks the Host against the domains as it is: a CA that asks
			// on another port than 80 (a host behind a port forward, a test) names it.
			r.Host = host
		}
		h.ServeHTTP(w, r)
	})
}

// acmeCache is the certificate cache, telling the edge when a certificate is stored:
// obtained or renewed.
type acmeCache struct {
	autocert.Cache
	a *acmeCerts
}

func (c *acmeCache) Put(ctx context.Context, key string, data []byte) error {
	if err := c.Cache.Put(ctx, key, data); err != nil {
		c.a.log.Error("the ACME certificate cache cannot be written; certificates are asked for again at every start", "key", key, "err", err)
		return err
	}
	name := strings.TrimSuffix(key, "+rsa")
	if !c.a.domains[name] {
		return nil // the account key, a challenge's token
	}
	if leaf := firstCertificate(data); leaf != nil {
		c.a.metrics.acme.WithLabelValues("obtained").Inc()
		c.a.metrics.expiry.WithLabelValues(name).Set(float64(leaf.NotAfter.Unix()))
		c.a.log.Info("ACME certificate obtained", "name", name, "notAfter", leaf.NotAfter, "issuer", leaf.Issuer.CommonName)
	}
	return nil
}

// firstCertificate parses the first certificate of a PEM bundle, or nil.
func firstCertificate(data []byte) *x509.Certificate {
	for len(data) > 0 {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil
		}
		if b.Type == "CERTIFICATE" {
			c, _ := x509.ParseCertificate(b.Bytes)
			return c
		}
	}
	return nil
}

// certNames are the host names a certificate covers.
func certNames(c *x509.Certificate) []string {
	if c == nil {
		return nil
	}
	names := append([]string(nil), c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 && c.Subject.CommonName != "" {
		names = append(names, c.Subject.CommonName)
	}
	return names
}

// certName is a certificate's first name, for the expiry metric.
func certName(c *x509.Certificate) string {
	if n := certNames(c); len(n) > 0 {
		return n[0]
	}
	return "unnamed"
}

// hsts sets Strict-Transport-Security on every answer of the HTTPS listener.
func hsts(maxAge int) echo.MiddlewareFunc {
	value := "max-age=" + strconv.Itoa(maxAge)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if c.Request().TLS != nil {
				c.Response().Header().Set("Strict-Transport-Security", value)
			}
			return next(c)
		}
	}
}

// redirectToHTTPS answers every request of the plain HTTP listener with a permanent
// redirect (308: the method and body are kept) to the same host and path over HTTPS,
// on the public listener's port when it is not 443.
func redirectToHTTPS(httpsPort int, m *tlsMetrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if host == "" {
			http.Error(w, "a Host header is required", http.StatusBadRequest)
			return
		}
		if strings.Contains(host, ":") {
			host = "[" + host + "]" // an IPv6 address
		}
		if httpsPort != 443 {
			host += ":" + strconv.Itoa(httpsPort)
		}
		m.redirects.Inc()
		w.Header().Set("Connection", "close")
		http.Redirect(w, r, "https://"+host+r.URL.RequestURI(), http.StatusPermanentRedirect)
	})
}

// openTLS sets HTTPS up when it is configured: the certificate source (files, watched
// for changes, or an ACME CA), the TLS configuration, HSTS on every answer of the
// public listener, and the series.
func (e *Edge) openTLS() error {
	if !e.cfg.TLS() {
		return nil
	}
	e.tlsm = newTLSMetrics(e.Registry)
	var src certSource
	if e.cfg.TLSCertFile != "" {
		f, err := openFileCerts(e.cfg.TLSCertFile, e.cfg.TLSKeyFile, e.Log, e.tlsm)
		if err != nil {
			return err
		}
		f.watch(envconf.Ms(e.cfg.TLSReloadMS))
		e.files, src = f, f
	} else {
		a, err := newACMECerts(e.cfg, e.ACMEHTTPClient, e.Log, e.tlsm)
		if err != nil {
			return err
		}
		e.acme, src = a, a
	}
	e.tlsConfig = newTLSConfig(src, e.acme != nil)
	if e.cfg.HSTSMaxAgeS > 0 {
		e.public.Use(hsts(e.cfg.HSTSMaxAgeS))
	}
	return nil
}

// closeTLS stops watching the certificate files and waits for the certificates asked
// for at start (Close cancelled them first).
func (e *Edge) closeTLS() {
	if e.files != nil {
		e.files.close()
	}
	if e.acme != nil {
		e.acme.wg.Wait()
	}
}
