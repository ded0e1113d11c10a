package httpapi_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/ratelimit"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
)

// clientFrom returns an HTTP client whose connections come from the loopback address
// ip: on Linux every 127.0.0.0/8 address is the local host, so distinct loopback
// addresses are distinct clients to the public listener without trusting any header.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4}}
}

// call sends one request and returns its status, Retry-After and error code.
func call(tb testing.TB, c *http.Client, method, url string) (status int, retryAfter, code string) {
	tb.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	buf, _ := io.ReadAll(resp.Body)
	var e httpkit.ErrorResponse
	_ = json.Unmarshal(buf, &e)
	return resp.StatusCode, resp.Header.Get("Retry-After"), e.Error.Code
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestJoinFlood sends 10,000 guest joins from one client address as fast as one
// connection goes: past the burst they get 429 rate_limited with Retry-After, the heap
// does not grow with the flood, and a client at another address still joins.
func TestJoinFlood(t *testing.T) {
	const perMin, burst, flood = 60, 10, 10_000
	join := ratelimit.New(perMin, burst)
	s, _ := MustOpenServer(t, func(s *httpapi.Server) { s.Limits.Join = join })
	url := s.PublicURL() + public.PathJoin
	attacker := clientFrom("127.0.0.3")

	before := heapInUse()
	start := time.Now()
	var ok, limited int
	for i := 0; i < flood; i++ {
		status, retry, code := call(t, attacker, http.MethodPost, url)
		switch {
		case status == http.StatusOK:
			ok++
		case status == http.StatusTooManyRequests && code == apierr.ERATELIMITED && retry != "":
			limited++
		default:
			t.Fatalf("join %d: status %d code %q Retry-After %q", i+1, status, code, retry)
		}
	}
	elapsed := time.Since(start)
	after := heapInUse()
	t.Logf("%d joins in %v: %d allowed, %d refused; heap in use %d KiB before, %d KiB after",
		flood, elapsed.Round(time.Millisecond), ok, limited, before>>10, after>>10)

	if maxOK := burst + int(elapsed.Minutes()*perMin) + 1; ok < burst || ok > maxOK {
		t.Errorf("%d joins allowed, want between %d and %d", ok, burst, maxOK)
	}
	if growth := int64(after) - int64(before); growth > 2<<20 {
		t.Errorf("heap grew by %d KiB over the flood, want under 2 MiB", growth>>10)
	}
	if n := join.Len(); n != 1 {
		t.Errorf("limiter tracks %d addresses, want 1", n)
	}
	if status, _, code := call(t, clientFrom("127.0.0.4"), http.MethodPost, url); status != http.StatusOK {
		t.Fatalf("join from another address: %d %s", status, code)
	}
}
