package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/envconf"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/orchestrator"
)

// adminUsage is `orchestrator admin -h`.
const adminUsage = `Usage: orchestrator admin [METHOD] PATH [BODY]

Calls the admin API of the orchestrator running beside this process (in the same
container, or on the same host): its control listener at ORCH_CONTROL_ADDR, with the
root secret read as that orchestrator reads it (ORCH_INTERNAL_RPC_SECRET, else the file
internal-rpc-secret beside ORCH_DB_PATH). The secret is sent, never printed.

  METHOD  GET, POST, PUT or DELETE; without it, GET, or POST when a BODY is given
  PATH    a path of the control listener with its query: /admin/maps,
          /admin/maps/forest-1/restart, "/admin/items?holder=ID", /metrics
  BODY    the request's JSON body, or - to read it from stdin

The answer's body is printed to stdout as it came. Exit status: 0 on a 2xx answer;
1 on an error answer, whose {"error":{"code","message"}} is printed to stderr; 2 when
no answer was had (bad arguments or configuration, no root secret, nothing listening).

The image has no shell and no curl; run it where the orchestrator runs:
  docker exec mapyard_orchestrator_1 /orchestrator admin /admin/maps
  docker exec mapyard_orchestrator_1 /orchestrator admin POST /admin/maps '{"instanceId":"forest-1","mapId":"forest"}'
  docker exec -i mapyard_orchestrator_1 /orchestrator admin PUT /admin/item-policies/crown - < crown.json
`

// adminMethods are the methods of the admin API's routes.
var adminMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete}

// adminDialTimeout bounds the connection to the control listener, which is local. The
// request itself has no deadline: a create or a stop answers once the map has started
// or stopped.
const adminDialTimeout = 5 * time.Second

// adminRequest is one `orchestrator admin` call, as its arguments name it.
type adminRequest struct {
	method string
	path   *url.URL // the path and query only
	body   []byte   // nil: none
}

// runAdmin is `orchestrator admin`: one request to the control listener of the
// orchestrator configured by environ, with its root secret.
func runAdmin(args, environ []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, adminUsage)
		return 0
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "orchestrator admin: "+format+"\n", a...)
		return 2
	}
	req, err := parseAdminArgs(args, stdin)
	if err != nil {
		return fail("%v (try -h)", err)
	}
	var cfg orchestrator.Config
	if err := envconf.Load(&cfg, environ); err != nil {
		return fail("invalid configuration: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		return fail("invalid configuration: %v", err)
	}
	secret, err := cfg.RootSecret()
	if err != nil {
		return fail("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	u := &url.URL{Scheme: "http", Host: cfg.ControlAddr, Path: req.path.Path, RawPath: req.path.RawPath, RawQuery: req.path.RawQuery}
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u.String(), body)
	if err != nil {
		return fail("%v", err)
	}
	hr.Header.Set(httpkit.SecretHeader, secret)
	if req.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	resp, err := adminClient().Do(hr)
	if err != nil {
		return fail("no answer from the control listener at %s (is the orchestrator running in this container or on this host?): %v", cfg.ControlAddr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		buf, _ := io.ReadAll(io.LimitReader(resp.Body, httpkit.DefaultMaxBodySize))
		e := httpkit.AnswerError(req.method, req.path.String(), resp.StatusCode, buf)
		out, _ := json.Marshal(httpkit.ErrorResponse{Error: *e})
		fmt.Fprintf(stderr, "%s\n", out)
		return 1
	}
	if err := copyAnswer(stdout, resp.Body); err != nil {
		return fail("read the answer of %s %s: %v", req.method, req.path, err)
	}
	return 0
}

// parseAdminArgs reads [METHOD] PATH [BODY]; a BODY of "-" is read from stdin.
func parseAdminArgs(args []string, stdin io.Reader) (adminRequest, error) {
	var r adminRequest
	if len(args) > 0 && !strings.HasPrefix(args[0], "/") {
		r.method = strings.ToUpper(args[0])
		if !slices.Contains(adminMethods, r.method) {
			return r, fmt.Errorf("%q is neither a method (%s) nor a path (/admin/...)", args[0], strings.Join(adminMethods, ", "))
		}
		args = args[1:]
	}
	switch len(args) {
	case 0:
		return r, errors.New("no PATH")
	case 1, 2:
	default:
		return r, fmt.Errorf("%d arguments after PATH: the BODY is one argument (quote it) or - for stdin", len(args)-1)
	}
	p, err := url.Parse(args[0])
	// The root secret goes with the request: only a path of this orchestrator's control
	// listener is taken, never a URL ("//host/..." parses as one).
	if err != nil || p.Scheme != "" || p.Host != "" || p.User != nil || p.Fragment != "" || !strings.HasPrefix(p.Path, "/") {
		return r, fmt.Errorf("PATH %q: must be a path of the control listener, such as /admin/maps", args[0])
	}
	r.path = p
	if len(args) == 2 {
		if args[1] == "-" {
			if r.body, err = io.ReadAll(stdin); err != nil {
				return r, fmt.Errorf("read BODY from stdin: %w", err)
			}
		} else {
			r.body = []byte(args[1])
		}
	}
	if r.method == "" {
		r.method = http.MethodGet
		if r.body != nil {
			r.method = http.MethodPost
		}
	}
	if r.body != nil && r.method == http.MethodGet {
		return r, errors.New("GET takes no BODY")
	}
	return r, nil
}

// adminClient speaks to the local control listener only: no proxy from the
// environment and no redirect followed, since every request carries the root secret.
func adminClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:       nil,
			DialContext: (&net.Dialer{Timeout: adminDialTimeout}).DialContext,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// copyAnswer copies an answer's body to w, ending it with a newline when it has none,
// so that the next shell prompt starts on its own line.
func copyAnswer(w io.Writer, body io.Reader) error {
	lw := &lastByteWriter{w: w}
	n, err := io.Copy(lw, body)
	if err != nil {
		return err
	}
	if n > 0 && lw.last != '\n' {
		_, err = io.WriteString(w, "\n")
	}
	return err
}

// lastByteWriter writes to w and keeps the last byte written.
type lastByteWriter struct {
	w    io.Writer
	last byte
}

var _ io.Writer = (*lastByteWriter)(nil)

// Write implements io.Writer.
func (l *lastByteWriter) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	if n > 0 {
		l.last = p[n-1]
	}
	return n, err
}
