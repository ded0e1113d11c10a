// Package ratelimit limits how often one client address may call a public route: a
// token bucket (golang.org/x/time/rate) per address, kept in a map that is bounded in
// size and forgets idle addresses, so a flood of requests, or of addresses, costs the
// server a fixed amount of memory. Refused requests get 429 with code "rate_limited"
// and a Retry-After header. It is a plain net/http middleware so that whichever process
// holds the public listener (the orchestrator, or the edge) uses the same limits.
package ratelimit

import (
	"container/list"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Defaults of a Limiter's bound.
const (
	// DefaultMaxClients bounds the addresses one Limiter tracks (about 200 bytes each).
	DefaultMaxClients = 65536
)

// Limiter allows each client address Burst requests at once and PerMinute requests a
// minute on average. Set the fields before first use (New does), then use it from any
// goroutine.
type Limiter struct {
	// PerMinute is the sustained rate per address; 0 disables the limit.
	PerMinute int
	// Burst is how many requests an address may make at once.
	Burst int
	// MaxClients bounds the tracked addresses. Past it the address seen least recently
	// is forgotten (it starts again with a full bucket): a flood of addresses can make
	// the limit forget, never make the server grow.
	MaxClients int
	// Now is the clock; tests inject one.
	Now func() time.Time

	mu      sync.Mutex
	clients map[netip.Addr]*list.Element // of *client
	lru     list.List                    // front: seen most recently
	refused uint64
}

// client is one address's bucket and when it was last seen.
type client struct {
	addr netip.Addr
	lim  *rate.Limiter
	seen time.Time
}

// New returns a Limiter of perMinute requests a minute with burst, tracking at most
// DefaultMaxClients addresses.
func New(perMinute, burst int) *Limiter {
	return &Limiter{PerMinute: perMinute, Burst: burst, MaxClients: DefaultMaxClients, Now: time.Now}
}

// Key is the address a limit applies to: an IPv4 address, or the /64 network of an IPv6
// address, since one IPv6 host commonly holds a whole /64. IPv4-mapped IPv6 addresses
// count as the IPv4 address.
func Key(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// Allow takes one request from addr's bucket. When the bucket is empty it returns false
// and how long until a request would be allowed.
func (l *Limiter) Allow(addr netip.Addr) (ok bool, retryAfter time.Duration) {
	if l.PerMinute <= 0 {
		return true, 0
	}
	now := l.Now()
	key := Key(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expireLocked(now)
	c := l.clientLocked(key, now)
	r := c.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); !r.OK() || d > 0 {
		r.CancelAt(now)
		l.refused++
		if !r.OK() {
			d = l.refill()
		}
		return false, d
	}
	return true, 0
}

// clientLocked returns key's client, marked as seen now, adding it (and forgetting the
// least recently seen past MaxClients) if it is new.
func (l *Limiter) clientLocked(key netip.Addr, now time.Time) *client {
	if e, ok := l.clients[key]; ok {
		c := e.Value.(*client)
		c.seen = now
		l.lru.MoveToFront(e)
		return c
	}
	if l.clients == nil {
		l.clients = make(map[netip.Addr]*list.Element)
	}
	for l.MaxClients > 0 && len(l.clients) >= l.MaxClients {
		l.removeLocked(l.lru.Back())
	}
	c := &client{addr: key, seen: now, lim: rate.NewLimiter(rate.Limit(float64(l.PerMinute)/60), max(l.Burst, 1))}
	l.clients[key] = l.lru.PushFront(c)
	return c
}

// expireLocked forgets addresses idle long enough for their bucket to be full again:
// such an address is indistinguishable from a new one, so forgetting it changes no
// answer and keeps the map to the addresses that are actually busy.
func (l *Limiter) expireLocked(now time.Time) {
	idle := l.refill()
	for e := l.lru.Back(); e != nil; e = l.lru.Back() {
		if now.Sub(e.Value.(*client).seen) < idle {
			return
		}
		l.removeLocked(e)
	}
}

func (l *Limiter) removeLocked(e *list.Element) {
	delete(l.clients, e.Value.(*client).addr)
	l.lru.Remove(e)
}

// refill is how long an empty bucket takes to fill up.
func (l *Limiter) refill() time.Duration {
	return time.Duration(float64(max(l.Burst, 1)) * float64(time.Minute) / float64(l.PerMinute))
}

// Len is the number of addresses tracked now.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clients)
}

// Refused is how many requests the Limiter has refused since it was made.
func (l *Limiter) Refused() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refused
}
