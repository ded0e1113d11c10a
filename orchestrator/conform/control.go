package conform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/mapyard/mapyard/docs/schemas"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/keys"
)

// playInstance checks the default instance: its registration, its container, its
// control listener, its players, its heartbeats.
func (r *runner) playInstance(ctx context.Context) {
	needA := []string{"map-ready"}
	r.check(ctx, "map-ready", r.opts.StartTimeout+5*time.Second, nil, r.checkMapReady)
	r.check(ctx, "read-only-root", checkTimeout, needA, r.checkReadOnly)
	// The writable probe starts now, beside the checks that follow; it is stopped later.
	r.startProbe(ctx)
	r.check(ctx, "health", checkTimeout, needA, func(ctx context.Context) error {
		inst, cred, err := r.reach(ctx, r.a)
		if err != nil {
			return err
		}
		return r.checkHealthOf(ctx, inst.ControlPort, cred, r.a, mapID, r.hashes[r.a])
	})
	r.check(ctx, "credential-missing", checkTimeout, needA, func(ctx context.Context) error {
		return r.refusedCredential(ctx, "", "no credential")
	})
	r.check(ctx, "credential-wrong", checkTimeout, needA, func(ctx context.Context) error {
		// The credential of another container of the same instance: one the map must not
		// take for its own.
		other, err := r.setup.root.OrchCredential(keys.Identity{InstanceID: r.a, Generation: keys.NewGeneration()})
		if err != nil {
			return err
		}
		return r.refusedCredential(ctx, other, "another container's credential")
	})
	r.check(ctx, "credential-accepted", checkTimeout, needA, r.checkCredentialAccepted)
	r.check(ctx, "start-instance-again", checkTimeout, needA, func(ctx context.Context) error {
		inst, cred, err := r.reach(ctx, r.a)
		if err != nil {
			return err
		}
		status, body, err := r.controlCall(ctx, inst.ControlPort, http.MethodPost, mapcontract.PathStartInstance, cred, r.startBody(r.a))
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("the same instance again: HTTP %d %s, want 200", status, brief(body))
		}
		return r.healthBody("control/start-instance.answer.json", body, r.a, mapID)
	})
	r.check(ctx, "start-instance-other", checkTimeout, needA, func(ctx context.Context) error {
		inst, cred, err := r.reach(ctx, r.a)
		if err != nil {
			return err
		}
		status, body, err := r.controlCall(ctx, inst.ControlPort, http.MethodPost, mapcontract.PathStartInstance, cred, r.startBody(r.x))
		if err != nil {
			return err
		}
		return r.errorAnswer(status, body, http.StatusConflict, apierr.ECONFLICT)
	})
	r.playTickets(ctx)
	r.check(ctx, "heartbeats", r.opts.HeartbeatTimeout+5*time.Second, needA, r.checkHeartbeats)
}

// checkMapReady waits for the default instance to be ready and checks the map's
// registration.
func (r *runner) checkMapReady(ctx context.Context) error {
	if _, err := r.life.waitInstance(ctx, r.a, "the map ready", func(i orchestrator.Instance) bool {
		return i.State == orchestrator.StateReady && i.Registered
	}); err != nil {
		return r.notReady(r.a, err)
	}
	return r.waitRegistration(ctx, r.a, mapID, r.life.opened)
}

// waitRegistration waits for instance id's registration since `since` and checks it:
// every map-ready call per schema with the ids and the contract's ports, and one
// answered {"registered": true}. The supervisor may call an instance ready a moment
// before the map's call is answered (a handout, or the answer on its way), so the
// check waits on the calls, not on the instance's state.
func (r *runner) waitRegistration(ctx context.Context, id, wantMap string, since time.Time) error {
	var why error
	err := r.setup.tap.wait(ctx, "map-ready of "+id, func() bool {
		var done bool
		done, why = r.registration(id, wantMap, since)
		return done
	})
	if why != nil {
		return why
	}
	return err
}

// registration reads instance id's map-ready calls since `since`: done with an error
// at the first that breaks the contract, done without one once a call was answered
// registered, not done (with why) otherwise.
func (r *runner) registration(id, wantMap string, since time.Time) (done bool, why error) {
	calls := r.setup.tap.find(mapcontract.PathMapReady, func(c call) bool { return c.Instance == id && !c.At.Before(since) })
	for _, c := range calls {
		if err := r.validateRequest(c); err != nil {
			return true, err
		}
		var m mapcontract.MapReady
		if err := json.Unmarshal(c.Body, &m); err != nil {
			return true, err
		}
		if m.MapID != wantMap || m.GamePort != docker.MapGamePort || m.ControlPort != docker.MapControlPort {
			return true, fmt.Errorf("map-ready %s: want mapId %q, gamePort %d, controlPort %d", brief(c.Body), wantMap, docker.MapGamePort, docker.MapControlPort)
		}
		var a mapcontract.HeartbeatAnswer
		if c.Status == http.StatusOK && json.Unmarshal(c.Answer, &a) == nil && a.Registered {
			return true, nil
		}
	}
	if len(calls) == 0 {
		return false, fmt.Errorf("%s never called %s", id, mapcontract.PathMapReady)
	}
	last := calls[len(calls)-1]
	return false, fmt.Errorf("map-ready of %s never answered registered: last answer HTTP %d %s", id, last.Status, brief(last.Answer))
}

// notReady explains why instance id is not ready: the supervisor's reason, which says
// how its container ended when it did.
func (r *runner) notReady(id string, err error) error {
	inst, ierr := r.life.sup.Instance(id)
	if ierr != nil {
		return err
	}
	why := fmt.Sprintf("%s is %s (%s)", id, inst.State, inst.Reason)
	if inst.LastExitCode != nil {
		why += fmt.Sprintf(", last exit code %d", *inst.LastExitCode)
	}
	if tail := r.logTail(inst.ContainerID); tail != "" {
		why += "; its log ends: " + tail
	}
	return fmt.Errorf("%w: %s", err, why)
}

// logTail returns the last lines a container wrote (stdout and stderr), joined with
// " | ", for a map author who sees only the report; "" when there are none.
func (r *runner) logTail(containerID string) string {
	if containerID == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc, err := r.cli.ContainerLogs(ctx, containerID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "3"})
	if err != nil {
		return ""
	}
	defer rc.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, io.LimitReader(rc, 16<<10)); err != nil && out.Len() == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for i, l := range lines {
		lines[i] = brief([]byte(l))
	}
	return strings.Join(lines, " | ")
}

// reach returns instance id once ready and the credential its control listener takes.
func (r *runner) reach(ctx context.Context, id string) (orchestrator.Instance, string, error) {
	inst, err := r.life.waitInstance(ctx, id, id+" ready", func(i orchestrator.Instance) bool {
		return i.State == orchestrator.StateReady && i.ControlPort != 0 && i.ContainerID != ""
	})
	if err != nil {
		return inst, "", r.notReady(id, err)
	}
	cred, err := r.containerCredential(ctx, inst.ContainerID)
	return inst, cred, err
}

// containerCredential is the orchestrator's credential towards a container,
// recomputed from its labels as the orchestrator does after a restart.
func (r *runner) containerCredential(ctx context.Context, containerID string) (string, error) {
	info, err := r.cli.ContainerInspect(ctx, containerID)
	if err != nil {
		return "", fmt.Errorf("inspect container: %w", err)
	}
	labels := info.Config.Labels
	id := keys.Identity{InstanceID: labels[docker.LabelInstance], Generation: labels[docker.LabelGeneration]}
	if id.InstanceID == "" {
		id.InstanceID = labels[docker.LabelPool]
	}
	return r.setup.root.OrchCredential(id)
}

// controlCall makes one request to a map's control listener published on loopback.
func (r *runner) controlCall(ctx context.Context, port int, method, path, cred string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://127.0.0.1:"+strconv.Itoa(port)+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cred != "" {
		req.Header.Set(httpkit.SecretHeader, cred)
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, httpkit.DefaultMaxBodySize))
	return resp.StatusCode, answer, err
}

// startBody is a start-instance request for instance id with its whole config.
func (r *runner) startBody(id string) []byte {
	b, _ := json.Marshal(mapcontract.StartInstance{InstanceID: id, MapID: mapID, Config: r.configs[id]})
	return b
}

// checkHealthOf asks GET /health until the world's hash is there (a map generates its
// world after answering start-instance) and checks the answer.
func (r *runner) checkHealthOf(ctx context.Context, port int, cred, wantInstance, wantMap, wantHash string) error {
	var last error
	err := poll(ctx, "a /health with the world's hash", func() bool {
		status, body, err := r.controlCall(ctx, port, http.MethodGet, mapcontract.PathHealth, cred, nil)
		switch {
		case err != nil:
			last = err
		case status != http.StatusOK:
			last = fmt.Errorf("GET /health: HTTP %d %s, want 200", status, brief(body))
		default:
			last = r.healthBody("control/health.answer.json", body, wantInstance, wantMap)
			var h mapcontract.MapHealth
			if last == nil && json.Unmarshal(body, &h) == nil && h.WorldHash == "" && wantHash != "" {
				last = errors.New("GET /health has no worldHash")
				return false
			}
			if last == nil && wantHash != "" && h.WorldHash != wantHash {
				last = fmt.Errorf("GET /health worldHash %s, want %s (the world of its config)", h.WorldHash, wantHash)
			}
			return true
		}
		return false
	})
	if last != nil {
		return last
	}
	return err
}

// healthBody checks a /health body (or start-instance's, the same) against its schema
// and the ids it must report.
func (r *runner) healthBody(schema string, body []byte, wantInstance, wantMap string) error {
	if err := r.schemas.Validate(schema, body); err != nil {
		return err
	}
	var h mapcontract.MapHealth
	if err := json.Unmarshal(body, &h); err != nil {
		return err
	}
	if h.InstanceID != wantInstance || h.MapID != wantMap {
		return fmt.Errorf("the map reports instance %q of map %q, want %q of %q", h.InstanceID, h.MapID, wantInstance, wantMap)
	}
	return nil
}

// A controlRoute is one route a map serves the orchestrator, with the body a check
// sends it.
type controlRoute struct {
	method, path string
	body         []byte
}

// controlRoutes are the routes the credential checks call: both that a map serves.
func (r *runner) controlRoutes() []controlRoute {
	return []controlRoute{{http.MethodGet, mapcontract.PathHealth, nil}, {http.MethodPost, mapcontract.PathStartInstance, r.startBody(r.a)}}
}

// refusedCredential checks that both control routes refuse cred (none when "") with 401
// and an error body.
func (r *runner) refusedCredential(ctx context.Context, cred, what string) error {
	inst, _, err := r.reach(ctx, r.a)
	if err != nil {
		return err
	}
	for _, c := range r.controlRoutes() {
		status, body, err := r.controlCall(ctx, inst.ControlPort, c.method, c.path, cred, c.body)
		if err != nil {
			return err
		}
		if err := r.errorAnswer(status, body, http.StatusUnauthorized, ""); err != nil {
			return fmt.Errorf("%s %s with %s: %w", c.method, c.path, what, err)
		}
	}
	return nil
}

// checkCredentialAccepted checks that the right credential opens both control routes.
func (r *runner) checkCredentialAccepted(ctx context.Context) error {
	inst, cred, err := r.reach(ctx, r.a)
	if err != nil {
		return err
	}
	for _, c := range r.controlRoutes() {
		status, body, err := r.controlCall(ctx, inst.ControlPort, c.method, c.path, cred, c.body)
		if err != nil {
			return err
		}
		if status/100 != 2 {
			return fmt.Errorf("%s %s with MAP_ORCH_CREDENTIAL: HTTP %d %s", c.method, c.path, status, brief(body))
		}
	}
	return nil
}

// errorAnswer checks an error answer: the status, a body per common/error.json and,
// when code is not "", its code.
func (r *runner) errorAnswer(status int, body []byte, wantStatus int, code string) error {
	if status != wantStatus {
		return fmt.Errorf("HTTP %d %s, want %d", status, brief(body), wantStatus)
	}
	if err := r.schemas.Validate("common/error.json", body); err != nil {
		return fmt.Errorf("HTTP %d with a body that is no error answer: %w", status, err)
	}
	var e httpkit.ErrorResponse
	_ = json.Unmarshal(body, &e)
	if code != "" && e.Error.Code != code {
		return fmt.Errorf("HTTP %d code %q, want %q", status, e.Error.Code, code)
	}
	return nil
}

// validateRequest checks a map's call against its route's request schema.
func (r *runner) validateRequest(c call) error {
	req, _, ok := schemas.ForRoute(c.Path)
	if !ok {
		return fmt.Errorf("%s is not a route of the contract", c.Path)
	}
	if err := r.schemas.Validate(req, c.Body); err != nil {
		return fmt.Errorf("%s: %w", c.Path, err)
	}
	return nil
}

// brief is a body cut short for a message.
func brief(b []byte) string {
	const max = 200
	s := string(bytes.TrimSpace(b))
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
