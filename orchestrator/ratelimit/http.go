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

	"github.com/mapyard/mapyard/orchestrator"
)

// ClientAddr finds the address a request comes from. By default that is the TCP peer:
// X-Forwarded-For is believed only when the peer is one of TrustedProxies (a reverse
// proxy in front of the public listener), because anyone can send the header and
// believing it from anyone would let a client pick a fresh address per request.
type ClientAddr struct {
	TrustedProxies []netip.Prefix
}

// ParsePrefixes parses a comma-separated list of CIDR prefixes or single addresses, as
// ORCH_TRUSTED_PROXIES holds them. An empty list trusts no proxy.
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if a, err := netip.ParseAddr(f); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an address nor a CIDR prefix", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
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

// Middleware returns net/http middleware that takes one request from the client
// address's bucket and refuses, with 429, code "rate_limited" and Retry-After (whole
// seconds, rounded up), a request over the limit.
func (l *Limiter) Middleware(addr ClientAddr) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a, ok := addr.Of(r)
			if !ok {
				next.ServeHTTP(w, r)
				return
			}
			if allowed, wait := l.Allow(a); !allowed {
				refuse(w, wait)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
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
		Error orchestrator.Error `json:"error"`
	}{orchestrator.Error{
		Code:    orchestrator.ERATELIMITED,
		Message: fmt.Sprintf("too many requests from this address; retry in %d s", secs),
	}})
}
