package edge_test

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator/edge"
)

// from returns a dialer whose connections come from the loopback address ip: every
// 127.0.0.0/8 address is this host, so distinct loopback addresses are distinct clients
// to the edge without trusting any header.
func from(ip string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
}

// TestEdge_RateLimits checks the public door's per-address limits: past the burst, a
// join and a map WebSocket upgrade get 429 rate_limited with Retry-After, each route
// counting on its own, and a client at another address is not affected.
func TestEdge_RateLimits(t *testing.T) {
	backend := echoBackend(t)
	orch := newFakeOrch(t, ready("forest-1", portOf(t, backend)))
	e := MustOpenEdge(t, orch.URL, func(c *edge.Config) {
		c.JoinRatePerMin, c.JoinRateBurst = 6, 2
		c.WSRatePerMin, c.WSRateBurst = 6, 1
	})
	join := func(ip string) *http.Response {
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: from(ip).DialContext}}
		resp, err := hc.Post(e.PublicURL()+public.PathJoin, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	t.Run("ErrRateLimitedJoin", func(t *testing.T) {
		for i := 0; i < 2; i++ {
			if resp := join("127.0.0.3"); resp.StatusCode != http.StatusOK {
				t.Fatalf("join %d of the burst: %d", i+1, resp.StatusCode)
			}
		}
		resp := join("127.0.0.3")
		if resp.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
		errorOf(t, resp, http.StatusTooManyRequests, apierr.ERATELIMITED)
		if resp := join("127.0.0.4"); resp.StatusCode != http.StatusOK {
			t.Fatalf("join from another address: %d", resp.StatusCode)
		}
	})
	t.Run("ErrRateLimitedUpgrade", func(t *testing.T) {
		d := &websocket.Dialer{NetDialContext: from("127.0.0.3").DialContext, HandshakeTimeout: 5 * time.Second}
		c, _, err := d.Dial(wsURL(e, "forest-1"), nil)
		if err != nil {
			t.Fatalf("first upgrade (joins do not count against upgrades): %v", err)
		}
		c.Close()
		_, resp, err := d.Dial(wsURL(e, "forest-1"), nil)
		if err == nil {
			t.Fatal("second upgrade past the burst was let through")
		}
		errorOf(t, resp, http.StatusTooManyRequests, apierr.ERATELIMITED)
		dialEcho(t, wsURL(e, "forest-1"), nil) // 127.0.0.1: another address
	})
}

// TestEdge_TrustedProxyRateLimits runs the per-address limits behind a reverse proxy
// (EDGE_TRUSTED_PROXIES) with each header a proxy may name the client in: the client
// named by the trusted proxy gets its own bucket, the orchestrator and the map are told
// that address, the header is ignored from any other peer, and the header the edge was
// not told to read is never believed.
func TestEdge_TrustedProxyRateLimits(t *testing.T) {
	for _, tc := range []struct {
		header, other string
		name          func(ip string) string
	}{
		{"X-Forwarded-For", "Forwarded", func(ip string) string { return "203.0.113.50, " + ip }},
		{"Forwarded", "X-Forwarded-For", func(ip string) string { return `for=203.0.113.50, for="` + ip + `:4711";proto=https` }},
	} {
		t.Run(strings.ReplaceAll(tc.header, "-", ""), func(t *testing.T) {
			backend := echoBackend(t)
			orch := newFakeOrch(t, ready("forest-1", portOf(t, backend)))
			e := MustOpenEdge(t, orch.URL, func(c *edge.Config) {
				c.JoinRatePerMin, c.JoinRateBurst = 6, 2
				c.WSRatePerMin, c.WSRateBurst = 6, 1
				c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
				c.TrustedProxyHeader = tc.header
			})
			join := func(peer string, h http.Header) int {
				hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: from(peer).DialContext}}
				req, _ := http.NewRequest(http.MethodPost, e.PublicURL()+public.PathJoin, strings.NewReader(`{}`))
				req.Header = h
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			named := func(ip string) http.Header { return http.Header{tc.header: {tc.name(ip)}} }
			for i := 0; i < 2; i++ {
				if got := join("127.0.0.1", named("198.51.100.1")); got != http.StatusOK {
					t.Fatalf("join %d of client 1's burst through the proxy: %d", i+1, got)
				}
			}
			if got := join("127.0.0.1", named("198.51.100.1")); got != http.StatusTooManyRequests {
				t.Fatalf("client 1 past its burst: %d, want 429", got)
			}
			if got := join("127.0.0.1", named("198.51.100.2")); got != http.StatusOK {
				t.Fatalf("client 2 through the same proxy: %d, want its own bucket", got)
			}
			orch.mu.Lock()
			xff := orch.joins[len(orch.joins)-1].Header.Get("X-Forwarded-For")
			orch.mu.Unlock()
			if xff != "198.51.100.2" {
				t.Errorf("the orchestrator was told X-Forwarded-For %q, want the client the proxy named", xff)
			}
			// The other header is the client's own from a proxy that writes this one:
			// a fresh address in it must not open a fresh bucket.
			forged := http.Header{tc.other: {"for=192.0.2.9, 192.0.2.9"}}
			if got := join("127.0.0.1", forged); got != http.StatusOK {
				t.Fatalf("a request naming nobody in %s: %d", tc.header, got)
			}
			if got := join("127.0.0.1", forged); got != http.StatusOK {
				t.Fatalf("second request naming nobody: %d", got)
			}
			if got := join("127.0.0.1", forged); got != http.StatusTooManyRequests {
				t.Fatalf("%s was believed: %d, want 429 for the proxy's own address", tc.other, got)
			}
			// From a peer that is no trusted proxy, the header is the client's own.
			for i := 0; i < 2; i++ {
				join("127.0.0.6", named(fmt.Sprintf("198.51.100.%d", 10+i)))
			}
			if got := join("127.0.0.6", named("198.51.100.12")); got != http.StatusTooManyRequests {
				t.Fatalf("an untrusted peer named a fresh client and got %d, want 429", got)
			}

			// A WebSocket upgrade: the limit counts the named client, and the map is
			// told its address.
			d := &websocket.Dialer{HandshakeTimeout: 5 * time.Second}
			c, _, err := d.Dial(wsURL(e, "forest-1"), named("198.51.100.3"))
			if err != nil {
				t.Fatal(err)
			}
			var seen map[string]string
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if err := c.ReadJSON(&seen); err != nil {
				t.Fatal(err)
			}
			c.Close()
			if seen["xff"] != "198.51.100.3" {
				t.Errorf("the map was told X-Forwarded-For %q, want the client the proxy named", seen["xff"])
			}
			if _, resp, err := d.Dial(wsURL(e, "forest-1"), named("198.51.100.3")); err == nil {
				t.Fatal("client 3's second upgrade past its burst was let through")
			} else {
				errorOf(t, resp, http.StatusTooManyRequests, apierr.ERATELIMITED)
			}
			if c, _, err := d.Dial(wsURL(e, "forest-1"), named("198.51.100.4")); err != nil {
				t.Fatalf("client 4 through the same proxy: %v", err)
			} else {
				c.Close()
			}
		})
	}
}
