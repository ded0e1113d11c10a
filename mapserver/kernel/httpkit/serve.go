package httpkit

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"golang.org/x/sync/errgroup"
)

// NewEcho returns an echo instance set up the way every mapyard listener is: quiet, the
// shared error handler, and panics recovered — logged with their stack and answered as
// internal errors — so no panic reaches a client or takes a process down.
func NewEcho(log *slog.Logger) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = ErrorHandler(log)
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{
		DisableStackAll: true,
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			log.Error("panic in handler", "path", c.Path(), "err", err, "stack", string(stack))
			return err
		},
	}))
	return e
}

// Servers serves handlers on listeners in the background and shuts them down together.
// Both binaries bind their listeners synchronously (so ports are known, and a busy port
// fails start-up) and hand them to Serve.
type Servers struct {
	mu      sync.Mutex
	servers []*http.Server
	group   errgroup.Group
}

// Serve serves h on ln until Close. Headers must arrive within 10 s, bodies within
// BodyReadTimeout (see DecodeJSON), and idle keep-alive connections are closed after
// two minutes; upgraded WebSockets are the handler's to time out.
func (s *Servers) Serve(ln net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	s.mu.Lock()
	s.servers = append(s.servers, srv)
	s.mu.Unlock()
	s.group.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
}

// Close stops accepting connections and waits, up to ctx, for requests in flight.
func (s *Servers) Close(ctx context.Context) error {
	s.mu.Lock()
	servers := s.servers
	s.mu.Unlock()
	var errs []error
	for _, srv := range servers {
		errs = append(errs, srv.Shutdown(ctx))
	}
	errs = append(errs, s.group.Wait())
	return errors.Join(errs...)
}

// LoopbackHostPort is the host:port at which this host reaches a listener bound to a:
// its own address, or 127.0.0.1 when it binds all interfaces. Both binaries' URL
// methods use it, so tests can bind :0 and still dial the result.
func LoopbackHostPort(a net.Addr) string {
	ta := a.(*net.TCPAddr)
	host := ta.IP.String()
	if ta.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(ta.Port))
}
