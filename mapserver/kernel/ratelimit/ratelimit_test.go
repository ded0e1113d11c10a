package ratelimit_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/ratelimit"
)

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newLimiter(perMinute, burst int) (*ratelimit.Limiter, *clock) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	l := ratelimit.New(perMinute, burst)
	l.Now = c.now
	return l, c
}

var (
	alice = netip.MustParseAddr("192.0.2.1")
	bob   = netip.MustParseAddr("192.0.2.2")
)

func TestAllow(t *testing.T) {
	l, c := newLimiter(60, 3) // one a second, three at once
	for i := 0; i < 3; i++ {
		if ok, _ := l.Allow(alice); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	t.Run("RefusedOverBurst", func(t *testing.T) {
		ok, wait := l.Allow(alice)
		if ok {
			t.Fatal("fourth request at once allowed")
		}
		if wait <= 0 || wait > time.Second {
			t.Fatalf("retry after %v, want (0, 1s]", wait)
		}
	})
	t.Run("OtherAddressUnaffected", func(t *testing.T) {
		if ok, _ := l.Allow(bob); !ok {
			t.Fatal("another address was refused")
		}
	})
	t.Run("AllowedAfterRefill", func(t *testing.T) {
		c.t = c.t.Add(time.Second)
		if ok, _ := l.Allow(alice); !ok {
			t.Fatal("refused after a token refilled")
		}
		if ok, _ := l.Allow(alice); ok {
			t.Fatal("allowed twice on one refilled token")
		}
	})
	if got := l.Refused(); got != 2 {
		t.Errorf("Refused() = %d, want 2", got)
	}
}

func TestDisabled(t *testing.T) {
	l, _ := newLimiter(0, 1)
	for i := 0; i < 100; i++ {
		if ok, _ := l.Allow(alice); !ok {
			t.Fatal("a disabled limiter refused")
		}
	}
	if l.Len() != 0 {
		t.Fatalf("a disabled limiter tracks %d addresses", l.Len())
	}
}

// TestBounded floods the limiter with distinct addresses: it never tracks more than
// MaxClients, and the addresses still being refused are the recent ones.
func TestBounded(t *testing.T) {
	l, _ := newLimiter(60, 1)
	l.MaxClients = 1000
	base := netip.MustParseAddr("10.0.0.0").As4()
	for i := 0; i < 100_000; i++ {
		a := base
		a[1], a[2], a[3] = byte(i>>16), byte(i>>8), byte(i)
		l.Allow(netip.AddrFrom4(a))
		if l.Len() > l.MaxClients {
			t.Fatalf("tracks %d addresses, bound %d", l.Len(), l.MaxClients)
		}
	}
	n := 99_999
	last := base
	last[1], last[2], last[3] = byte(n>>16), byte(n>>8), byte(n)
	if ok, _ := l.Allow(netip.AddrFrom4(last)); ok {
		t.Fatal("the most recent address was forgotten")
	}
}

// TestExpires checks that an address idle long enough for its bucket to refill is
// forgotten, so a quiet limiter holds nothing.
func TestExpires(t *testing.T) {
	l, c := newLimiter(60, 5) // refills from empty in 5 s
	l.Allow(alice)
	c.t = c.t.Add(4 * time.Second)
	l.Allow(bob)
	if l.Len() != 2 {
		t.Fatalf("tracks %d, want 2", l.Len())
	}
	c.t = c.t.Add(time.Second) // alice idle 5 s, bob 1 s
	l.Allow(bob)
	if l.Len() != 1 {
		t.Fatalf("tracks %d after alice's bucket refilled, want 1", l.Len())
	}
}

func TestKeyIPv6Network(t *testing.T) {
	a := netip.MustParseAddr("2001:db8:1:2::1")
	b := netip.MustParseAddr("2001:db8:1:2:ffff::9")
	other := netip.MustParseAddr("2001:db8:1:3::1")
	if ratelimit.Key(a) != ratelimit.Key(b) {
		t.Error("two addresses of one /64 have different keys")
	}
	if ratelimit.Key(a) == ratelimit.Key(other) {
		t.Error("two /64 networks share a key")
	}
	if got := ratelimit.Key(netip.MustParseAddr("::ffff:192.0.2.1")); got != alice {
		t.Errorf("IPv4-mapped key = %v, want %v", got, alice)
	}
}

func TestClientAddr(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.1.0.0/16")}
	for _, tt := range []struct {
		name, remote, xff, want string
		trust                   bool
	}{
		{"PeerWhenNoProxyTrusted", "127.0.0.1:5000", "198.51.100.7", "127.0.0.1", false},
		{"HeaderIgnoredFromUntrustedPeer", "203.0.113.9:5000", "198.51.100.7", "203.0.113.9", true},
		{"ClientBehindTrustedProxy", "127.0.0.1:5000", "198.51.100.7", "198.51.100.7", true},
		{"SpoofedLeftPartIgnored", "127.0.0.1:5000", "1.2.3.4, 198.51.100.7, 10.1.2.3", "198.51.100.7", true},
		{"MangledHeaderStopsAtLastGood", "127.0.0.1:5000", "junk", "127.0.0.1", true},
		{"NoHeaderFromProxy", "127.0.0.1:5000", "", "127.0.0.1", true},
		{"PortAndBracketsAccepted", "127.0.0.1:5000", "[2001:db8::7]:443, 198.51.100.7:5555", "198.51.100.7", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/api/v1/join", nil)
			r.RemoteAddr = tt.remote
			if tt.xff != "" {
				r.Header.Set("X-Forwarded-For", tt.xff)
			}
			r.Header.Set("Forwarded", "for=192.0.2.99") // not the configured header: never read
			var ca ratelimit.ClientAddr
			if tt.trust {
				ca.TrustedProxies = proxies
			}
			got, ok := ca.Of(r)
			if !ok || got.String() != tt.want {
				t.Fatalf("Of = %v (%v), want %s", got, ok, tt.want)
			}
		})
	}
}

// TestClientAddr_Forwarded reads RFC 7239's Forwarded header from trusted proxies,
// and X-Forwarded-For no longer.
func TestClientAddr_Forwarded(t *testing.T) {
	ca := ratelimit.ClientAddr{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.1.0.0/16")},
		Header: ratelimit.HeaderForwarded}
	for _, tt := range []struct {
		name, remote string
		forwarded    []string
		want         string
	}{
		{"ClientBehindTrustedProxy", "127.0.0.1:5000", []string{"for=198.51.100.7;proto=https;host=play.example"}, "198.51.100.7"},
		{"HeaderIgnoredFromUntrustedPeer", "203.0.113.9:5000", []string{"for=198.51.100.7"}, "203.0.113.9"},
		{"SpoofedLeftPartIgnored", "127.0.0.1:5000", []string{"for=1.2.3.4, for=198.51.100.7", "for=10.1.2.3;by=10.1.0.1"}, "198.51.100.7"},
		{"QuotedIPv6WithPort", "127.0.0.1:5000", []string{`For="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::17"},
		{"QuotedIPv4WithPort", "127.0.0.1:5000", []string{`for="198.51.100.7:4711";proto=http`}, "198.51.100.7"},
		{"QuotedSeparatorsKept", "127.0.0.1:5000", []string{`for=198.51.100.7;host="a,b;c"`}, "198.51.100.7"},
		{"UnknownStopsAtLastGood", "127.0.0.1:5000", []string{"for=unknown"}, "127.0.0.1"},
		{"ObfuscatedStopsAtLastGood", "127.0.0.1:5000", []string{"for=198.51.100.7, for=_hidden"}, "127.0.0.1"},
		{"ElementWithoutForStops", "127.0.0.1:5000", []string{"proto=https"}, "127.0.0.1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/api/v1/join", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.forwarded {
				r.Header.Add("Forwarded", v)
			}
			r.Header.Set("X-Forwarded-For", "192.0.2.99") // not the configured header: never read
			got, ok := ca.Of(r)
			if !ok || got.String() != tt.want {
				t.Fatalf("Of = %v (%v), want %s", got, ok, tt.want)
			}
		})
	}
}

func TestMiddleware(t *testing.T) {
	l, _ := newLimiter(6, 2) // one every 10 s
	h := l.Middleware(ratelimit.ClientAddr{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	call := func(remote string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/api/v1/join", nil)
		r.RemoteAddr = remote
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for i := 0; i < 2; i++ {
		if w := call("192.0.2.1:1000"); w.Code != http.StatusNoContent {
			t.Fatalf("request %d: status %d", i+1, w.Code)
		}
	}
	w := call("192.0.2.1:1001")
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429", w.Code)
	}
	if got := w.Header().Get("Retry-After"); got != "10" {
		t.Errorf("Retry-After = %q, want 10", got)
	}
	var body struct{ Error apierr.Error }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error.Code != apierr.ERATELIMITED {
		t.Errorf("body %s (%v), want code %s", w.Body, err, apierr.ERATELIMITED)
	}
	if w := call("192.0.2.2:1000"); w.Code != http.StatusNoContent {
		t.Fatalf("another address: status %d", w.Code)
	}
}

func BenchmarkAllow(b *testing.B) {
	l := ratelimit.New(1<<30, 1<<30)
	b.ReportAllocs()
	for b.Loop() {
		l.Allow(alice)
	}
}
