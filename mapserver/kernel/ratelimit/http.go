package ratelimit

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
)

// Headers in which a trusted proxy names the client (ClientAddr.Header).
const (
	HeaderXForwardedFor = "X-Forwarded-For"
	HeaderForwarded     = "Forwarded" // RFC 7239: the for= parameter of each element
)

// ClientAddr finds the address a request comes from. By default that is the TCP peer:
// the header a reverse proxy writes the client's address in (X-Forwarded-For, or
// Forwarded) is believed only when the peer is one of TrustedProxies (a reverse proxy
// in front of the public listener), because anyone can send either header and
// believing it from anyone would let a client pick a fresh address per request.
type ClientAddr struct {
	TrustedProxies []netip.Prefix
	// Header is the header the trusted proxies write: HeaderXForwardedFor (also when
	// empty) or HeaderForwarded. Only that one is read. A proxy that writes one header
	// passes the other on as the client sent it, so reading both would let a client
	// behind that proxy name itself after all.
	Header string
}

func (c ClientAddr) trusted(a netip.Addr) bool {
	for _, p := range c.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Of returns the client address of r: the peer, or, when the peer is a trusted proxy,
// the right-most address of the proxies' header that is not itself a trusted proxy
// (the left part of the header is whatever the client wrote). A hop that is no address
// (a mangled entry, Forwarded's "unknown" or an obfuscated name) stops the walk at the
// last address known good. ok is false when the peer address cannot be parsed, which a
// net/http server never produces.
func (c ClientAddr) Of(r *http.Request) (a netip.Addr, ok bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	a = ap.Addr().Unmap()
	if len(c.TrustedProxies) == 0 || !c.trusted(a) {
		return a, true
	}
	var hops []string
	if strings.EqualFold(c.Header, HeaderForwarded) {
		hops = forwardedFor(r.Header.Values(HeaderForwarded))
	} else {
		for _, v := range r.Header.Values(HeaderXForwardedFor) {
			hops = append(hops, strings.Split(v, ",")...)
		}
	}
	for i := len(hops) - 1; i >= 0; i-- {
		hop, ok := parseNode(hops[i])
		if !ok {
			return a, true
		}
		a = hop
		if !c.trusted(a) {
			return a, true
		}
	}
	return a, true
}

// forwardedFor returns the for= value of every element of the Forwarded header
// values, in order; an element without one gives "" (no address).
func forwardedFor(values []string) []string {
	var hops []string
	for _, v := range values {
		for _, elem := range splitQuoted(v, ',') {
			node := ""
			for _, pair := range splitQuoted(elem, ';') {
				k, val, _ := strings.Cut(pair, "=")
				if strings.EqualFold(strings.TrimSpace(k), "for") {
					node = val
				}
			}
			hops = append(hops, node)
		}
	}
	return hops
}

// splitQuoted splits s at sep outside double-quoted strings (RFC 7230 quoted-string,
// backslash escapes included).
func splitQuoted(s string, sep byte) []string {
	var parts []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == sep:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// parseNode parses one hop: an IPv4 or IPv6 address, bracketed or not, with or
// without a port, quoted or not (Forwarded quotes IPv6 and ports).
func parseNode(s string) (netip.Addr, bool) {
	s = strings.Trim(strings.TrimSpace(s), `"`)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// Middleware returns net/http middleware that passes on only the requests Refuse lets
// through.
func (l *Limiter) Middleware(addr ClientAddr) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !l.Refuse(w, r, addr) {
				next.ServeHTTP(w, r)
			}
		})
	}
}

// Echo returns the middleware for an echo route: Refuse in front of the handler. A nil
// Limiter limits nothing, so a route can be wired whether or not a limit is configured.
func (l *Limiter) Echo(addr ClientAddr) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if l != nil && l.Refuse(c.Response(), c.Request(), addr) {
				return nil
			}
			return next(c)
		}
	}
}

// Refuse takes one request from the bucket of r's client address. Over the limit it
// answers 429 with code "rate_limited" and Retry-After (whole seconds, rounded up) and
// returns true: the caller must not answer again. Routers with their own middleware
// type (echo) call it directly.
func (l *Limiter) Refuse(w http.ResponseWriter, r *http.Request, addr ClientAddr) bool {
	a, ok := addr.Of(r)
	if !ok {
		return false
	}
	allowed, wait := l.Allow(a)
	if !allowed {
		refuse(w, wait)
	}
	return !allowed
}

// refuse writes the 429 answer in mapyard's error shape.
func refuse(w http.ResponseWriter, wait time.Duration) {
	secs := int(math.Ceil(wait.Seconds()))
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	_ = json.NewEncoder(w).Encode(struct {
		Error apierr.Error `json:"error"`
	}{apierr.Error{
		Code:    apierr.ERATELIMITED,
		Message: fmt.Sprintf("too many requests from this address; retry in %d s", secs),
	}})
}
