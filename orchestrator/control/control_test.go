package control_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/apierr"
	"github.com/mapyard/mapyard/orchestrator/control"
)

func TestUnmarshal(t *testing.T) {
	var empty orchestrator.JoinRequest
	if err := control.Unmarshal([]byte(" \n"), &empty); err != nil || empty != (orchestrator.JoinRequest{}) {
		t.Fatalf("empty body: %v %+v, want no fields", err, empty)
	}
	var v control.MapReady
	if err := control.Unmarshal([]byte(`{"instanceId":"a-1","gamePort":7000}`), &v); err != nil || v.InstanceID != "a-1" {
		t.Fatalf("valid body: %v %+v", err, v)
	}
	for name, body := range map[string]string{
		"ErrUnknownField": `{"instanceId":"a-1","extra":1}`,
		"ErrTrailingData": `{"instanceId":"a-1"} {}`,
		"ErrMalformed":    `{"instanceId":`,
		"ErrWrongType":    `{"gamePort":"x"}`,
	} {
		t.Run(name, func(t *testing.T) {
			err := control.Unmarshal([]byte(body), &v)
			if got := apierr.Code(err); got != apierr.EBADREQUEST {
				t.Fatalf("code %q (%v), want bad_request", got, err)
			}
		})
	}
}

// newServer serves one echo route, guarded by the secret, through the shared error handler.
func newServer(t *testing.T, h echo.HandlerFunc) *httptest.Server {
	e := echo.New()
	e.HTTPErrorHandler = control.ErrorHandler(slog.New(slog.NewTextHandler(io.Discard, nil)))
	e.POST(control.PathMapReady, h, control.RequireSecret("0123456789abcdef"))
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv
}

func TestClient_Errors(t *testing.T) {
	srv := newServer(t, func(c echo.Context) error {
		var r control.MapReady
		if err := control.DecodeJSON(c, &r, 128); err != nil {
			return err
		}
		if r.InstanceID == "gone" {
			return apierr.Errorf(apierr.ENOTFOUND, "instance %q is not wanted", r.InstanceID)
		}
		if r.InstanceID == "boom" {
			return io.ErrUnexpectedEOF // an internal error: its text must not reach the client
		}
		return c.NoContent(http.StatusOK)
	})
	ctx := context.Background()
	t.Run("OK", func(t *testing.T) {
		if err := control.NewClient(srv.URL, "0123456789abcdef").MapReady(ctx, control.MapReady{InstanceID: "a-1"}); err != nil {
			t.Fatal(err)
		}
	})
	for _, tt := range []struct {
		name, secret, id, code string
	}{
		{"ErrUnauthorized", "wrong-secret-0000", "a-1", apierr.EUNAUTHORIZED},
		{"ErrNotFound", "0123456789abcdef", "gone", apierr.ENOTFOUND},
		{"ErrTooLarge", "0123456789abcdef", strings.Repeat("x", 200), apierr.ETOOLARGE},
		{"ErrInternalHidden", "0123456789abcdef", "boom", apierr.EINTERNAL},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := control.NewClient(srv.URL, tt.secret).MapReady(ctx, control.MapReady{InstanceID: tt.id})
			if got := apierr.Code(err); got != tt.code {
				t.Fatalf("code %q (%v), want %q", got, err, tt.code)
			}
			if strings.Contains(err.Error(), "unexpected EOF") {
				t.Fatalf("internal cause leaked to the client: %v", err)
			}
		})
	}
}
