package conform

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
)

// tapBodyLimit bounds what the tap reads of a request: the largest body the contract
// allows (/orch/instance-items, 8 MiB) and then some, so the orchestrator, not the tap,
// refuses what is too large.
const tapBodyLimit = 9 << 20

// call is one request a map made to the orchestrator, as the map sent it, with the
// answer the orchestrator gave.
type call struct {
	At          time.Time // when the request arrived
	Method      string
	Path        string
	ContentType string
	Credential  string // X-Mapyard-Secret as sent
	Body        []byte
	Status      int // 0 while unanswered
	Answer      []byte
	// Instance is the instance the body names ("instanceId", or "fromInstanceId" of a
	// transfer request); "" when it names none.
	Instance string
}

// tap is the orchestrator's control listener as maps reach it: a proxy on the map
// network's gateway (host.docker.internal in every map container) forwarding each
// /orch/ call to the control listener of the orchestrator playing now and recording
// the call with its answer. The record is written before the answer leaves, so by the
// time a map acts on an answer (a welcome after a redeem, say) the call is on record.
// Between two lives of the orchestrator the tap is closed, as the orchestrator's
// listener would be.
type tap struct {
	hc  *http.Client
	log *slog.Logger

	mu       sync.Mutex
	calls    []*call
	changed  chan struct{}
	upstream string
	addr     string // host:port, fixed by the first open
	srv      *http.Server
}

// newTap returns a tap that records nothing yet and listens nowhere until open.
func newTap(log *slog.Logger) *tap {
	return &tap{hc: &http.Client{Timeout: 30 * time.Second}, log: log, changed: make(chan struct{})}
}

// open listens on host (the first time, on a free port; afterwards on the same port,
// which maps keep calling) and forwards to upstream, a control URL.
func (t *tap) open(host, upstream string) error {
	t.mu.Lock()
	addr := t.addr
	if addr == "" {
		addr = net.JoinHostPort(host, "0")
	}
	t.mu.Unlock()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("tap: listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(t.serve), ReadHeaderTimeout: 10 * time.Second}
	t.mu.Lock()
	t.addr, t.upstream, t.srv = ln.Addr().String(), upstream, srv
	t.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
	return nil
}

// port is the port maps call.
func (t *tap) port() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, port, _ := net.SplitHostPort(t.addr)
	return port
}

// close stops listening, lets the calls in flight finish (briefly: they are answered
// unavailable once no orchestrator plays) and cuts the connections maps hold.
func (t *tap) close() {
	t.mu.Lock()
	srv := t.srv
	t.srv, t.upstream = nil, ""
	t.mu.Unlock()
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = srv.Shutdown(ctx)
		cancel()
		_ = srv.Close()
	}
}

// serve forwards one call and records it.
func (t *tap) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, tapBodyLimit))
	if err != nil {
		writeError(w, http.StatusBadRequest, apierr.EBADREQUEST, "read body: "+err.Error())
		return
	}
	c := &call{At: time.Now(), Method: req.Method, Path: req.URL.Path, ContentType: req.Header.Get("Content-Type"),
		Credential: req.Header.Get(httpkit.SecretHeader), Body: body, Instance: bodyInstance(body)}
	t.mu.Lock()
	upstream := t.upstream
	t.calls = append(t.calls, c)
	t.mu.Unlock()

	status, answer := t.forward(req, upstream, body)
	t.log.Info("map call", "path", c.Path, "instance", c.Instance, "status", status, "ms", time.Since(c.At).Milliseconds())
	t.mu.Lock()
	c.Status, c.Answer = status, answer
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(answer)
}

// forward sends the call to the orchestrator and returns its answer. Only the
// contract's routes are forwarded: the gateway serves nothing else to maps.
func (t *tap) forward(req *http.Request, upstream string, body []byte) (int, []byte) {
	if !strings.HasPrefix(req.URL.Path, "/orch/") {
		return errorBody(http.StatusNotFound, apierr.ENOTFOUND, "no route "+req.URL.Path)
	}
	if upstream == "" {
		return errorBody(http.StatusServiceUnavailable, apierr.EUNAVAILABLE, "the orchestrator is restarting")
	}
	// A map that hangs up before the answer (it exits right after its last push, say)
	// still delivered the call, as it would to the orchestrator itself.
	out, err := http.NewRequestWithContext(context.WithoutCancel(req.Context()), req.Method, upstream+req.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return errorBody(http.StatusBadRequest, apierr.EBADREQUEST, err.Error())
	}
	for _, h := range []string{"Content-Type", httpkit.SecretHeader} {
		if v := req.Header.Get(h); v != "" {
			out.Header.Set(h, v)
		}
	}
	resp, err := t.hc.Do(out)
	if err != nil {
		return errorBody(http.StatusServiceUnavailable, apierr.EUNAVAILABLE, "orchestrator: "+err.Error())
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, tapBodyLimit))
	if err != nil {
		return errorBody(http.StatusServiceUnavailable, apierr.EUNAVAILABLE, "orchestrator answer: "+err.Error())
	}
	return resp.StatusCode, answer
}

// snapshot returns the calls recorded so far, answered or not.
func (t *tap) snapshot() []call {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]call, len(t.calls))
	for i, c := range t.calls {
		out[i] = *c
	}
	return out
}

// find returns the answered calls to path (every path when ""), in arrival order, that
// match keep (every one when nil).
func (t *tap) find(path string, keep func(c call) bool) []call {
	var out []call
	for _, c := range t.snapshot() {
		if c.Status != 0 && (path == "" || c.Path == path) && (keep == nil || keep(c)) {
			out = append(out, c)
		}
	}
	return out
}

// wait blocks until cond, asked again after every answered call, holds, or ctx ends.
func (t *tap) wait(ctx context.Context, what string, cond func() bool) error {
	for {
		t.mu.Lock()
		ch := t.changed
		t.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%s: not seen within the check's time", what)
		}
	}
}

// bodyInstance reads the instance a contract request body acts for.
func bodyInstance(body []byte) string {
	var b struct {
		InstanceID     string `json:"instanceId"`
		FromInstanceID string `json:"fromInstanceId"`
	}
	if json.Unmarshal(body, &b) != nil {
		return ""
	}
	if b.InstanceID != "" {
		return b.InstanceID
	}
	return b.FromInstanceID
}

// errorBody is the contract's error answer.
func errorBody(status int, code, message string) (int, []byte) {
	b, _ := json.Marshal(httpkit.ErrorResponse{Error: apierr.Error{Code: code, Message: message}})
	return status, b
}

// writeError answers with the contract's error body.
func writeError(w http.ResponseWriter, status int, code, message string) {
	status, b := errorBody(status, code, message)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
