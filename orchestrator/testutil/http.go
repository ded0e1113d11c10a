package testutil

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
)

// Do sends one request and fails the test unless the answer has wantStatus. body nil
// sends no body; a string or []byte is sent as is (to test malformed JSON); anything
// else is sent as JSON. The secret, when not empty, goes in httpkit.SecretHeader. A
// non-nil out receives the decoded answer. Do returns the answer's bytes.
func Do(tb testing.TB, method, url, secret string, body any, wantStatus int, out any) []byte {
	tb.Helper()
	h := http.Header{}
	if secret != "" {
		h.Set(httpkit.SecretHeader, secret)
	}
	return DoWith(tb, method, url, h, body, wantStatus, out)
}

// DoWith is Do with the request headers given in full.
func DoWith(tb testing.TB, method, url string, header http.Header, body any, wantStatus int, out any) []byte {
	tb.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	case []byte:
		rd = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			tb.Fatalf("%s %s: encode body: %v", method, url, err)
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	buf, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: read answer: %v", method, url, err)
	}
	if resp.StatusCode != wantStatus {
		tb.Fatalf("%s %s: status %d (%s), want %d", method, url, resp.StatusCode, buf, wantStatus)
	}
	if out != nil {
		if err := json.Unmarshal(buf, out); err != nil {
			tb.Fatalf("%s %s: decode %s: %v", method, url, buf, err)
		}
	}
	return buf
}

// PostJSON is Do with POST.
func PostJSON(tb testing.TB, url, secret string, body any, wantStatus int, out any) []byte {
	tb.Helper()
	return Do(tb, http.MethodPost, url, secret, body, wantStatus, out)
}

// GetJSON is Do with GET and no body.
func GetJSON(tb testing.TB, url, secret string, wantStatus int, out any) []byte {
	tb.Helper()
	return Do(tb, http.MethodGet, url, secret, nil, wantStatus, out)
}

// FreePort returns a loopback TCP port that was free a moment ago, for a child process
// that must be told its port before it starts.
func FreePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
