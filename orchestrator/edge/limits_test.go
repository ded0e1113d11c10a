package edge_test

import (
	"net"
	"net/http"
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
