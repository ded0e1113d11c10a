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

// ClientAddr finds the address a request comes from. By default that is the TCP peer:
// X-Forwarded-For is believed only when the peer is one of TrustedProxies (a reverse
// proxy in front of the public listener), because anyone can send the header and
// believing it from anyone would let a client pick a fresh address per request.
type ClientAddr struct {
	TrustedProxies []netip.Prefix
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
// the right-most address of X-Forwarded-For that is not itself a trusted proxy (the
// left part of the header is whatever the client wrote). ok is false when the peer
// address cannot be parsed, which a net/http server never produces.
func (c ClientAddr) Of(r *http.Request) (a netip.Addr, ok bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	a = ap.Addr().Unmap()
	if len(c.TrustedProxies) == 0 || !c.trusted(a) {
		return a, true
	}
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		fields := strings.Split(hops[i], ",")
		for j := len(fields) - 1; j >= 0; j-- {
			hop, err := netip.ParseAddr(strings.TrimSpace(fields[j]))
			if err != nil {
				return a, true // a mangled header: stop at the last address known good
			}
			a = hop.Unmap()
			if !c.trusted(a) {
				return a, true
			}
		}
	}
	return a, true
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
