package edge

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/acme"
)

// The public listener with HTTPS on: tlsListener accepts TCP connections, looks at
// their first bytes, completes each TLS handshake on a goroutine of its own, and hands
// the HTTP server only connections that completed one. So every refusal (a scanner, an
// HTTP request on the HTTPS port, a host name the edge has no certificate for, a hello
// too large, a client that refuses the certificate) is seen here, counted by reason and
// logged, and costs the players nothing: the HTTP server, the proxy and the epoll
// engine never see the connection.

const (
	// maxClientHello bounds the client hello the edge reads. Browsers send under 2 KiB
	// (a post-quantum key share included); Go itself takes up to 64 KiB.
	maxClientHello = 16 << 10
	// maxHandshakes bounds the handshakes under way at once; past it a new connection
	// is closed at once (reason busy). Each is bounded by the handshake timeout.
	maxHandshakes = 4096
	// tlsRecordHandshake is the content type of a TLS record carrying a handshake message.
	tlsRecordHandshake = 0x16
)

// tlsListener is the public listener's HTTPS side; see above.
type tlsListener struct {
	net.Listener // the public listener (a gate)
	cfg          *tls.Config
	timeout      time.Duration
	metrics      *tlsMetrics
	log          *handshakeLog

	ready  chan net.Conn // connections whose handshake completed
	errc   chan error    // the inner listener's Accept errors
	done   chan struct{} // closed by Close
	ctx    context.Context
	cancel context.CancelFunc // by Close: handshakes under way end at once
	slots  chan struct{}
	wg     sync.WaitGroup // handshakes under way
	once   sync.Once
}

func newTLSListener(inner net.Listener, cfg *tls.Config, timeout time.Duration, m *tlsMetrics, log *slog.Logger) *tlsListener {
	l := &tlsListener{Listener: inner, cfg: cfg, timeout: timeout, metrics: m, log: &handshakeLog{log: log},
		ready: make(chan net.Conn), errc: make(chan error), done: make(chan struct{}), slots: make(chan struct{}, maxHandshakes)}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	go l.acceptLoop()
	return l
}

// Accept returns the next connection whose handshake completed, as a *tls.Conn, so
// that the HTTP server sets each request's TLS state.
func (l *tlsListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.errc:
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting; handshakes under way end with their connections closed.
func (l *tlsListener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		l.cancel()
		err = l.Listener.Close()
	})
	return err
}

// acceptLoop accepts TCP connections and starts their handshakes. A temporary Accept
// error is passed to the HTTP server, which backs off before it accepts again; a
// permanent one (the listener closed, or handed over to the next edge) is passed on
// once the handshakes under way ended, so that those that complete are still served.
func (l *tlsListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			temporary := isTemporaryAccept(err)
			if !temporary {
				l.wg.Wait()
			}
			select {
			case l.errc <- err:
			case <-l.done:
				return
			}
			if !temporary {
				return
			}
			continue
		}
		select {
		case l.slots <- struct{}{}:
		default:
			c.Close()
			l.refused(tlsBusy, c.RemoteAddr(), errors.New("too many TLS handshakes under way"))
			continue
		}
		l.wg.Add(1)
		go l.handshake(c)
	}
}

// isTemporaryAccept says whether an Accept error passes (out of descriptors, a
// connection aborted before it was accepted), as net/http treats it.
func isTemporaryAccept(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// handshake looks at the connection's first bytes, completes its TLS handshake within
// the timeout, and hands it to Accept; or refuses it with a reason.
func (l *tlsListener) handshake(raw net.Conn) {
	defer func() { <-l.slots; l.wg.Done() }()
	deadline := time.Now().Add(l.timeout)
	_ = raw.SetDeadline(deadline)
	stop := context.AfterFunc(l.ctx, func() { _ = raw.SetDeadline(time.Unix(1, 0)) }) // Close: give up at once
	defer stop()
	t := &clientTransport{Conn: raw}
	if reason, err := t.sniff(); reason != "" {
		raw.Close()
		l.refused(reason, raw.RemoteAddr(), err)
		return
	}
	tc := tls.Server(t, l.cfg)
	ctx, cancel := context.WithDeadline(l.ctx, deadline)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		raw.Close()
		if t.refusal != nil {
			err = t.refusal
		}
		l.refused(classifyHandshake(err, t), raw.RemoteAddr(), err)
		return
	}
	if tc.ConnectionState().NegotiatedProtocol == acme.ALPNProto {
		raw.Close() // a TLS-ALPN-01 validation: the handshake was all of it
		l.log.log.Debug("answered an ACME TLS-ALPN-01 validation", "name", tc.ConnectionState().ServerName, "peer", raw.RemoteAddr().String())
		return
	}
	if !stop() {
		raw.Close() // the listener closed meanwhile
		return
	}
	_ = raw.SetDeadline(time.Time{})
	l.metrics.handshakes.Inc()
	select {
	case l.ready <- tc:
	case <-l.done:
		raw.Close()
	}
}

func (l *tlsListener) refused(reason string, peer net.Addr, err error) {
	l.metrics.errors.WithLabelValues(reason).Inc()
	l.log.refused(reason, peer, err)
}

// classifyHandshake names why a handshake failed.
func classifyHandshake(err error, t *clientTransport) string {
	msg := err.Error()
	switch {
	case t.reason != "":
		return t.reason
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return tlsTimeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed):
		return tlsEOF
	case strings.HasPrefix(msg, "remote error: tls: "):
		switch strings.TrimPrefix(msg, "remote error: tls: ") {
		case "bad certificate", "unknown certificate authority", "expired certificate", "unknown certificate",
			"unsupported certificate", "revoked certificate", "access denied":
			return tlsBadCertificate
		}
		return tlsClientAlert
	}
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) {
		return tlsNotTLS
	}
	return tlsProtocol
}

// clientTransport is the TCP connection under a player's TLS session. Until the epoll
// engine takes the socket it is the connection itself, after the bytes sniff read;
// the engine then reads and writes the socket itself, and the session reads what the
// engine read from in and writes its records to out (epolltls_linux.go).
type clientTransport struct {
	net.Conn
	pre     []byte // read by sniff, read again first
	reason  string // why the certificate source refused the hello
	refusal error  // and its words

	// Owned by the epoll engine once engine is set.
	engine bool
	eof    bool   // the socket's end was read
	in     []byte // read from the socket, not yet taken by the session
	out    []byte // records the session wrote, for the engine to write to the socket
}

// errWouldBlock is the transport's answer to a read of the session when the engine
// has nothing more for it: a temporary network error, which crypto/tls returns to its
// caller without failing the session.
var errWouldBlock error = wouldBlock{}

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "tls transport: no input yet" }
func (wouldBlock) Timeout() bool   { return true }
func (wouldBlock) Temporary() bool { return true }

func (t *clientTransport) Read(p []byte) (int, error) {
	switch {
	case len(t.pre) > 0:
		n := copy(p, t.pre)
		t.pre = t.pre[n:]
		return n, nil
	case !t.engine:
		return t.Conn.Read(p)
	case len(t.in) > 0:
		n := copy(p, t.in)
		t.in = t.in[n:]
		return n, nil
	case t.eof:
		return 0, io.EOF
	default:
		return 0, errWouldBlock
	}
}

func (t *clientTransport) Write(p []byte) (int, error) {
	if t.engine {
		t.out = append(t.out, p...)
		return len(p), nil
	}
	return t.Conn.Write(p)
}

func (t *clientTransport) Close() error {
	if t.engine {
		return nil // the engine closes its descriptor
	}
	return t.Conn.Close()
}

func (t *clientTransport) SetDeadline(d time.Time) error {
	if t.engine {
		return nil
	}
	return t.Conn.SetDeadline(d)
}

func (t *clientTransport) SetReadDeadline(d time.Time) error {
	if t.engine {
		return nil
	}
	return t.Conn.SetReadDeadline(d)
}

func (t *clientTransport) SetWriteDeadline(d time.Time) error {
	if t.engine {
		return nil
	}
	return t.Conn.SetWriteDeadline(d)
}

// sniff reads the first record's header and the first handshake message's header
// (9 bytes, kept in pre for the handshake) and refuses what is no TLS client hello, or
// one larger than maxClientHello: an HTTP request gets the answer net/http would give.
func (t *clientTransport) sniff() (reason string, err error) {
	var b [9]byte
	if _, err := io.ReadFull(t.Conn, b[:]); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return tlsTimeout, err
		}
		return tlsEOF, err
	}
	t.pre = b[:]
	if b[0] != tlsRecordHandshake {
		if looksLikeHTTP(b[:]) {
			_, _ = io.WriteString(t.Conn, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"+
				"Client sent an HTTP request to an HTTPS server.\n")
			return tlsPlainHTTP, errors.New("an HTTP request on the HTTPS port")
		}
		return tlsNotTLS, errors.New("the first bytes are no TLS handshake record")
	}
	if recLen := int(b[3])<<8 | int(b[4]); recLen >= 4 && b[5] == 1 {
		if n := int(b[6])<<16 | int(b[7])<<8 | int(b[8]); n > maxClientHello {
			return tlsHelloTooLarge, errors.New("a client hello larger than the edge takes")
		}
	}
	return "", nil
}

// looksLikeHTTP says whether b begins an HTTP/1 request.
func looksLikeHTTP(b []byte) bool {
	for _, m := range []string{"GET ", "HEAD ", "POST ", "PUT ", "DELETE ", "OPTIONS ", "PATCH ", "CONNECT ", "TRACE "} {
		n := min(len(m), len(b))
		if string(b[:n]) == m[:n] {
			return true
		}
	}
	return false
}

// handshakeLog logs refused handshakes at most once a minute per reason, with how
// many there were since the last line: scanners refuse by the thousand. A client that
// refused the certificate, or a certificate the CA did not issue, is a warning, since
// players cannot connect; the rest is information.
type handshakeLog struct {
	log  *slog.Logger
	mu   sync.Mutex
	last map[string]*handshakeLogEntry
}

type handshakeLogEntry struct {
	at    time.Time
	count int
}

// handshakeLogEvery is the least time between two lines of one reason.
const handshakeLogEvery = time.Minute

func (h *handshakeLog) refused(reason string, peer net.Addr, err error) {
	now := time.Now()
	h.mu.Lock()
	if h.last == nil {
		h.last = map[string]*handshakeLogEntry{}
	}
	e := h.last[reason]
	if e == nil {
		e = &handshakeLogEntry{}
		h.last[reason] = e
	}
	e.count++
	if !e.at.IsZero() && now.Sub(e.at) < handshakeLogEvery {
		h.mu.Unlock()
		return
	}
	n := e.count
	e.at, e.count = now, 0
	h.mu.Unlock()
	level := slog.LevelInfo
	if reason == tlsBadCertificate || reason == tlsNoCertificate {
		level = slog.LevelWarn
	}
	peerStr := ""
	if peer != nil {
		peerStr = peer.String()
	}
	h.log.Log(context.Background(), level, "TLS handshakes refused", "reason", reason, "count", n, "peer", peerStr, "err", err)
}
