package mapcontract_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
)

// newServer serves one echo route, guarded by the secret, through the shared error handler.
func newServer(t *testing.T, h echo.HandlerFunc) *httptest.Server {
	e := echo.New()
	e.HTTPErrorHandler = httpkit.ErrorHandler(slog.New(slog.NewTextHandler(io.Discard, nil)))
	e.POST(mapcontract.PathMapReady, h, httpkit.RequireSecret("0123456789abcdef"))
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv
}

func TestClient_Errors(t *testing.T) {
	srv := newServer(t, func(c echo.Context) error {
		var r mapcontract.MapReady
		if err := httpkit.DecodeJSON(c, &r, 128); err != nil {
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
		if err := mapcontract.NewClient(srv.URL, "0123456789abcdef").MapReady(ctx, mapcontract.MapReady{InstanceID: "a-1"}); err != nil {
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
			err := mapcontract.NewClient(srv.URL, tt.secret).MapReady(ctx, mapcontract.MapReady{InstanceID: tt.id})
			if got := apierr.Code(err); got != tt.code {
				t.Fatalf("code %q (%v), want %q", got, err, tt.code)
			}
			if strings.Contains(err.Error(), "unexpected EOF") {
				t.Fatalf("internal cause leaked to the client: %v", err)
			}
		})
	}
}
