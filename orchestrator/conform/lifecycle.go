package conform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
)

// poolMap is the blank warm-pool map of the first life.
type poolMap struct {
	id, containerID, cred string
	port                  int
}

// probeRun is what the stop of the writable probe showed.
type probeRun struct {
	created   error // the probe's create, made while the default map's checks ran
	stopped   bool
	at        time.Time // when SIGTERM was asked for
	container string
	char      *character
	player    *player
}

// playPool checks the warm pool: a blank map, a config it must refuse, its handout.
func (r *runner) playPool(ctx context.Context) {
	needPool := []string{"pool-registration"}
	r.check(ctx, "pool-registration", r.opts.StartTimeout+5*time.Second, nil, r.checkPoolRegistration)
	r.check(ctx, "start-instance-bad-config", checkTimeout, needPool, r.checkBadConfig)
	r.check(ctx, "pool-handout", r.opts.StartTimeout+5*time.Second, needPool, r.checkHandout)
}

// checkPoolRegistration finds the blank map's registration and container, and checks
// what it says of itself.
func (r *runner) checkPoolRegistration(ctx context.Context) error {
	tap := r.setup.tap
	var reg call
	if err := tap.wait(ctx, "a blank pool map's registration", func() bool {
		for _, c := range tap.find(mapcontract.PathMapReady, func(c call) bool { return strings.HasPrefix(c.Instance, mapgen.PoolIDPrefix) }) {
			reg = c
			if c.Status == http.StatusOK {
				return true
			}
		}
		return false
	}); err != nil {
		if reg.Path != "" {
			return fmt.Errorf("%w: its map-ready was answered HTTP %d %s", err, reg.Status, brief(reg.Answer))
		}
		return err
	}
	if err := r.validateRequest(reg); err != nil {
		return err
	}
	var m mapcontract.MapReady
	if err := json.Unmarshal(reg.Body, &m); err != nil {
		return err
	}
	if m.MapID != "" {
		return fmt.Errorf("a blank map registered with mapId %q, want \"\"", m.MapID)
	}
	list, err := r.cli.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", docker.LabelDeployment+"="+r.deployment), filters.Arg("label", docker.LabelPool+"="+m.InstanceID))})
	if err != nil || len(list) != 1 {
		return fmt.Errorf("the container of pool map %s: %d found (%v)", m.InstanceID, len(list), err)
	}
	pm := poolMap{id: m.InstanceID, containerID: list[0].ID}
	for _, p := range list[0].Ports {
		if p.PrivatePort == docker.MapControlPort && p.IP == "127.0.0.1" {
			pm.port = int(p.PublicPort)
		}
	}
	if pm.cred, err = r.containerCredential(ctx, pm.containerID); err != nil {
		return err
	}
	if err := r.checkHealthOf(ctx, pm.port, pm.cred, pm.id, "", ""); err != nil {
		return err
	}
	if err := r.waitRegisteredBeat(ctx, pm.id, reg.At); err != nil {
		return err
	}
	if err := poll(ctx, "the pool ready for a handout", func() bool { return r.life.sup.Pool().Ready >= 1 }); err != nil {
		return err
	}
	r.pool = pm
	return nil
}

// waitRegisteredBeat waits for a heartbeat of instance id, per schema, after `since`,
// answered registered.
func (r *runner) waitRegisteredBeat(ctx context.Context, id string, since time.Time) error {
	tap := r.setup.tap
	var bad error
	err := tap.wait(ctx, "a heartbeat of "+id+" answered registered", func() bool {
		for _, c := range tap.find(mapcontract.PathMapHeartbeat, func(c call) bool { return c.Instance == id && c.At.After(since) }) {
			if bad = r.validateRequest(c); bad != nil {
				return true
			}
			var a mapcontract.HeartbeatAnswer
			if c.Status == http.StatusOK && json.Unmarshal(c.Answer, &a) == nil && a.Registered {
				return true
			}
		}
		return false
	})
	if bad != nil {
		return bad
	}
	return err
}

// checkBadConfig offers the blank map a config no map can run (bounds below the
// schema's minimum), then checks it is still blank.
func (r *runner) checkBadConfig(ctx context.Context) error {
	var cfg map[string]any
	if err := json.Unmarshal(r.configs[r.x], &cfg); err != nil {
		return err
	}
	cfg["bounds"] = map[string]int{"width": 10, "height": 10}
	raw, _ := json.Marshal(cfg)
	body, _ := json.Marshal(mapcontract.StartInstance{InstanceID: r.x, MapID: mapID, Config: raw})
	status, answer, err := r.controlCall(ctx, r.pool.port, http.MethodPost, mapcontract.PathStartInstance, r.pool.cred, body)
	if err != nil {
		return err
	}
	if err := r.errorAnswer(status, answer, http.StatusBadRequest, apierr.EBADREQUEST); err != nil {
		return fmt.Errorf("a config with 10 m bounds: %w", err)
	}
	status, answer, err = r.controlCall(ctx, r.pool.port, http.MethodGet, mapcontract.PathHealth, r.pool.cred, nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("GET /health after the refusal: HTTP %d %s", status, brief(answer))
	}
	if err := r.healthBody("control/health.answer.json", answer, r.pool.id, ""); err != nil {
		return fmt.Errorf("not free after the refusal: %w", err)
	}
	return nil
}

// checkHandout creates an instance the supervisor hands the blank map, and plays it.
func (r *runner) checkHandout(ctx context.Context) error {
	since := time.Now()
	if _, err := r.life.sup.Create(ctx, orchestrator.CreateInstance{InstanceID: r.b, MapID: mapID, Config: r.configs[r.b]}); err != nil {
		return err
	}
	inst, cred, err := r.reach(ctx, r.b)
	if err != nil {
		return err
	}
	if inst.ContainerID != r.pool.containerID {
		return errors.New("the handout failed (start-instance on the blank map): the orchestrator started a container of its own")
	}
	if err := r.waitRegistration(ctx, r.b, mapID, since); err != nil {
		return fmt.Errorf("after the handout: %w", err)
	}
	if err := r.checkHealthOf(ctx, inst.ControlPort, cred, r.b, mapID, r.hashes[r.b]); err != nil {
		return err
	}
	if err := r.waitRegisteredBeat(ctx, r.b, since); err != nil {
		return err
	}
	c, _, err := r.newCharacter(ctx)
	if err != nil {
		return err
	}
	tok, err := r.mint(r.life.adm.Signer, c, r.b, time.Now(), ticketTTL)
	if err != nil {
		return err
	}
	p, err := r.hello(ctx, inst, tok)
	if err != nil {
		return err
	}
	defer p.close()
	return r.checkWelcome(p, tok, c, r.b)
}

// startProbe creates the writable probe: an instance in a container of its own with a
// writable root, so that its writes show in `docker diff`.
func (r *runner) startProbe(ctx context.Context) {
	_, r.probe.created = r.life.sup.Create(ctx, orchestrator.CreateInstance{InstanceID: r.w, MapID: mapID, Config: r.configs[r.w], Cold: true})
}

// playStop stops the probe with a player in it, as an operator's stop does.
func (r *runner) playStop(ctx context.Context) {
	// The probe registers as the default map does: without that, nothing is to stop.
	needA := []string{"map-ready"}
	r.check(ctx, "sigterm-exit", r.opts.StartTimeout+r.opts.StopGrace+15*time.Second, needA, r.checkSigterm)
	r.check(ctx, "push-on-sigterm", checkTimeout, needA, r.checkPushOnSigterm)
	r.check(ctx, "no-writes", checkTimeout, needA, r.checkNoWrites)
}

// checkSigterm welcomes a player into the probe, then stops it (SIGTERM, SIGKILL after
// the grace) and checks how it exited.
func (r *runner) checkSigterm(ctx context.Context) error {
	if r.probe.created != nil {
		return fmt.Errorf("not run: create the probe: %w", r.probe.created)
	}
	rctx, cancel := context.WithTimeout(ctx, r.opts.StartTimeout)
	inst, _, err := r.reach(rctx, r.w)
	cancel()
	if err != nil {
		return err
	}
	c, _, err := r.newCharacter(ctx)
	if err != nil {
		return err
	}
	tok, err := r.mint(r.life.adm.Signer, c, r.w, time.Now(), ticketTTL)
	if err != nil {
		return err
	}
	p, err := r.hello(ctx, inst, tok)
	if err != nil {
		return err
	}
	if err := r.checkWelcome(p, tok, c, r.w); err != nil {
		return fmt.Errorf("not run: the probe's player: %w", err)
	}
	r.probe.char, r.probe.player, r.probe.container, r.probe.at = c, p, inst.ContainerID, time.Now()
	err = r.life.sup.Stop(ctx, r.w)
	took := time.Since(r.probe.at)
	r.probe.stopped = true
	if err != nil {
		return err
	}
	after, err := r.life.sup.Instance(r.w)
	if err != nil {
		return err
	}
	switch code := after.LastExitCode; {
	case code == nil:
		return errors.New("its exit code is unknown")
	case *code == 137:
		return fmt.Errorf("still running %s after SIGTERM: killed (exit code 137)", r.opts.StopGrace)
	case *code != 0:
		return fmt.Errorf("exited with code %d after SIGTERM, want 0", *code)
	case took > r.opts.StopGrace:
		return fmt.Errorf("exited 0, but %s after SIGTERM: more than the grace of %s", took.Round(time.Millisecond), r.opts.StopGrace)
	}
	return nil
}

// checkPushOnSigterm checks what the probe did for its player once asked to stop.
func (r *runner) checkPushOnSigterm(ctx context.Context) error {
	if !r.probe.stopped {
		return errors.New("not run: the probe was not stopped")
	}
	var problems []string
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	code, err := r.probe.player.waitClose(cctx)
	cancel()
	switch {
	case err != nil:
		problems = append(problems, "the player's connection was not closed")
	case code != websocket.CloseGoingAway:
		problems = append(problems, fmt.Sprintf("the player's WebSocket was closed with %d, want 1001", code))
	}
	partition := record.CharacterPartitionPrefix + r.probe.char.id
	var pushes []call
	accepted := false
	// The probe has exited; a push it made last may still be on its way to the
	// orchestrator for a moment.
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_ = r.setup.tap.wait(wctx, "the push on SIGTERM", func() bool {
		pushes = r.setup.tap.find(mapcontract.PathPersistSnapshot, func(c call) bool {
			var p mapcontract.PersistSnapshot
			return c.Instance == r.w && c.At.After(r.probe.at) && json.Unmarshal(c.Body, &p) == nil && p.Partition == partition
		})
		for _, c := range pushes {
			var a mapcontract.PersistSnapshotAnswer
			accepted = accepted || (c.Status == http.StatusOK && json.Unmarshal(c.Answer, &a) == nil && a.Accepted)
		}
		return accepted
	})
	cancel()
	switch {
	case len(pushes) == 0:
		problems = append(problems, "no push of its player's character after SIGTERM")
	case !accepted:
		last := pushes[len(pushes)-1]
		problems = append(problems, fmt.Sprintf("its pushes after SIGTERM were not accepted: HTTP %d %s", last.Status, brief(last.Answer)))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// checkNoWrites reads what the probe changed in its file system, from its start to
// its exit.
func (r *runner) checkNoWrites(ctx context.Context) error {
	if !r.probe.stopped {
		return errors.New("not run: the probe was not stopped")
	}
	changes, ok, err := r.api.diff(r.probe.container)
	switch {
	case err != nil:
		return fmt.Errorf("docker diff: %w", err)
	case !ok:
		return errors.New("not run: the probe's changes were not read at its stop")
	case len(changes) > 0:
		var paths []string
		for _, c := range changes {
			paths = append(paths, changeKind(c.Kind)+" "+c.Path)
		}
		if len(paths) > 5 {
			paths = append(paths[:5], fmt.Sprintf("and %d more", len(changes)-5))
		}
		return fmt.Errorf("it changed its file system: %s", strings.Join(paths, ", "))
	}
	return nil
}

// changeKind names a change of `docker diff` in words.
func changeKind(k container.ChangeType) string {
	switch k {
	case container.ChangeAdd:
		return "added"
	case container.ChangeDelete:
		return "deleted"
	default:
		return "changed"
	}
}

// playKill kills the default map's container and checks the instance comes back.
func (r *runner) playKill(ctx context.Context) {
	r.check(ctx, "restart-after-kill", r.opts.StartTimeout+20*time.Second, []string{"map-ready"}, r.checkRestart)
}

// checkRestart kills the default map's container with SIGKILL, as a crash would, and
// waits for the supervisor to bring the instance back elsewhere.
func (r *runner) checkRestart(ctx context.Context) error {
	before, err := r.life.sup.Instance(r.a)
	if err != nil {
		return err
	}
	since := time.Now()
	if err := r.cli.ContainerKill(ctx, before.ContainerID, "SIGKILL"); err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	inst, err := r.life.waitInstance(ctx, r.a, "the instance ready in a new container", func(i orchestrator.Instance) bool {
		return i.State == orchestrator.StateReady && i.ContainerID != "" && i.ContainerID != before.ContainerID
	})
	if err != nil {
		return r.notReady(r.a, err)
	}
	if err := r.waitRegistration(ctx, r.a, mapID, since); err != nil {
		return fmt.Errorf("after the kill: %w", err)
	}
	return r.rejoin(ctx, inst)
}

// rejoin plays the seeded character into inst again with a new ticket.
func (r *runner) rejoin(ctx context.Context, inst orchestrator.Instance) error {
	if r.c1 == nil {
		return nil
	}
	tok, err := r.mint(r.life.adm.Signer, r.c1, inst.ID, time.Now(), ticketTTL)
	if err != nil {
		return err
	}
	p, err := r.hello(ctx, inst, tok)
	if err != nil {
		return err
	}
	r.p1 = p
	if err := r.checkWelcome(p, tok, r.c1, inst.ID); err != nil {
		return fmt.Errorf("its player: %w", err)
	}
	return nil
}

// playAdoption restarts the orchestrator under the running maps.
func (r *runner) playAdoption(ctx context.Context) {
	r.check(ctx, "adoption", r.opts.StartTimeout+r.opts.HeartbeatTimeout+15*time.Second, []string{"map-ready"}, r.checkAdoption)
}

// checkAdoption closes the orchestrator's first life and opens a second on the same
// database, root and control port, and checks the running maps through it.
func (r *runner) checkAdoption(ctx context.Context) error {
	// A quiet host: the pool refilled after the handouts, no start in flight.
	pctx, cancel := context.WithTimeout(ctx, r.opts.StartTimeout)
	_ = poll(pctx, "the pool refilled", func() bool { return r.life.sup.Pool().Ready >= 1 })
	cancel()
	type running struct{ container, started string }
	before := map[string]running{}
	for _, id := range []string{r.a, r.b} {
		inst, err := r.life.sup.Instance(id)
		if err != nil || inst.State != orchestrator.StateReady {
			continue
		}
		info, err := r.cli.ContainerInspect(ctx, inst.ContainerID)
		if err != nil {
			return err
		}
		before[id] = running{inst.ContainerID, info.State.StartedAt}
	}
	if len(before) == 0 {
		return errors.New("not run: no map is ready to be adopted")
	}
	err := r.setup.closeLife(r.life)
	r.life = nil
	if err != nil {
		return fmt.Errorf("stop the orchestrator: %w", err)
	}
	l, err := r.setup.openLife(ctx)
	if err != nil {
		return fmt.Errorf("start the orchestrator again: %w", err)
	}
	r.life = l
	for _, id := range []string{r.a, r.b} {
		was, ok := before[id]
		if !ok {
			continue
		}
		if err := r.waitRegistration(ctx, id, mapID, l.opened); err != nil {
			return fmt.Errorf("since the restart: %w", err)
		}
		inst, err := l.waitInstance(ctx, id, id+" ready and registered", func(i orchestrator.Instance) bool {
			return i.State == orchestrator.StateReady && i.Registered
		})
		if err != nil {
			return r.notReady(id, err)
		}
		info, err := r.cli.ContainerInspect(ctx, inst.ContainerID)
		if err != nil {
			return err
		}
		if inst.ContainerID != was.container || info.State.StartedAt != was.started {
			return fmt.Errorf("%s was not adopted: its container was replaced or restarted", id)
		}
		if err := r.waitRegisteredBeat(ctx, id, l.opened); err != nil {
			return err
		}
	}
	if _, ok := before[r.a]; ok {
		inst, err := l.sup.Instance(r.a)
		if err != nil {
			return err
		}
		return r.rejoin(ctx, inst)
	}
	return nil
}
