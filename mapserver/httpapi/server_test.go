package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"testing"

	"github.com/mapyard/mapyard/mapserver/httpapi"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/control"
)

const secret = "0123456789abcdef0123"

func MustOpenServer(tb testing.TB) *httpapi.Server {
	tb.Helper()
	s := httpapi.NewServer(secret, httpapi.Health{Status: "ok", InstanceID: "a-1", MapID: "default"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.GameAddr, s.ControlAddr = "127.0.0.1:0", "127.0.0.1:0"
	if err := s.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func TestServer_Health(t *testing.T) {
	s := MustOpenServer(t)
	url := "http://127.0.0.1:" + strconv.Itoa(s.ControlPort()) + control.PathHealth
	get := func(sec string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if sec != "" {
			req.Header.Set(control.SecretHeader, sec)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}
	t.Run("OK", func(t *testing.T) {
		resp, body := get(secret)
		var h httpapi.Health
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &h) != nil || h.InstanceID != "a-1" {
			t.Fatalf("status %d body %s", resp.StatusCode, body)
		}
	})
	for name, sec := range map[string]string{"ErrNoSecret": "", "ErrWrongSecret": secret[:19] + "x"} {
		t.Run(name, func(t *testing.T) {
			resp, body := get(sec)
			var e control.ErrorResponse
			if resp.StatusCode != http.StatusUnauthorized || json.Unmarshal(body, &e) != nil || e.Error.Code != orchestrator.EUNAUTHORIZED {
				t.Fatalf("status %d body %s, want 401 unauthorized", resp.StatusCode, body)
			}
		})
	}
}
