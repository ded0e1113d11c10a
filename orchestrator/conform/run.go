package conform

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/mapyard/mapyard/docs/schemas"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/keys"
)

// mapID is the map every instance of a run plays. It has no template of mapyard's, so
// every config is one the run made (Complete lays it over the default template) and
// sent whole, as the contract says the orchestrator always does.
const mapID = "conform"

// Container limits of a run: the orchestrator's defaults (ORCH_MAP_MEMORY_MB,
// ORCH_MAP_CPUS, ORCH_MAP_PIDS_LIMIT), so the image runs as a host runs it.
const (
	mapMemoryMB  = 512
	mapNanoCPUs  = 1_000_000_000
	mapPidsLimit = 256
)

// checkTimeout bounds a check that waits on nothing slower than a map's answers.
const checkTimeout = 15 * time.Second

// runner is one conformance run: the image, the throwaway deployment the orchestrator
// plays it on, what the checks share, and the results so far.
type runner struct {
	opts     Options
	cli      *client.Client
	image    image.InspectResponse
	schemas  *schemas.Set
	onResult func(Result)
	report   *Report
	failed   map[string]bool
	done     map[string]bool

	deployment string
	dir        string
	api        *probeAPI
	setup      *orchestratorSetup
	life       *life

	// The instances: a (the default map, where players play), b (handed out from the
	// warm pool), w (the writable probe that is stopped), x (never started: the
	// "other" instance of refusals).
	a, b, w, x string
	configs    map[string]json.RawMessage // each instance's start config
	hashes     map[string]string          // the hash of the world each config generates

	shared
}

// Run checks opts.Image and returns the report, calling onResult (when not nil) with
// each result as it is decided. It fails only when it cannot run at all: no engine, an
// image the engine does not have, or a deployment it cannot set up. The deployment's
// containers are removed before it returns, whatever happened.
func Run(ctx context.Context, opts Options, onResult func(Result)) (*Report, error) {
	if opts.Image == "" {
		return nil, errors.New("conform: no image to check")
	}
	opts = opts.withDefaults()
	cli := opts.Docker
	if cli == nil {
		var err error
		if cli, err = client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation()); err != nil {
			return nil, fmt.Errorf("conform: docker client: %w", err)
		}
		defer cli.Close()
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		return nil, fmt.Errorf("conform: docker engine: %w", err)
	}
	img, err := cli.ImageInspect(pctx, opts.Image)
	if err != nil {
		return nil, fmt.Errorf("conform: image %s: %w (build or load it into this engine first)", opts.Image, err)
	}
	set, err := schemas.Load()
	if err != nil {
		return nil, fmt.Errorf("conform: schemas: %w", err)
	}
	r := &runner{opts: opts, cli: cli, image: img, schemas: set, onResult: onResult,
		report: &Report{Image: opts.Image}, failed: map[string]bool{}, done: map[string]bool{},
		configs: map[string]json.RawMessage{}, hashes: map[string]string{}}
	defer r.cleanup()
	if err := r.prepare(ctx); err != nil {
		return nil, fmt.Errorf("conform: %w", err)
	}
	if err := r.openFirstLife(ctx); err != nil {
		return nil, fmt.Errorf("conform: start the orchestrator: %w", err)
	}
	r.play(ctx)
	for _, c := range Checks {
		if !r.done[c.Name] {
			r.record(Result{Name: c.Name, Detail: "not run: the run was cut short"})
		}
	}
	return r.report, nil
}

// play runs every check in the order of Checks, phase by phase, against the
// orchestrator's first life (the adoption check starts the second).
func (r *runner) play(ctx context.Context) {
	r.check(ctx, "container-user", checkTimeout, nil, r.checkUser)
	r.playInstance(ctx)
	r.playPool(ctx)
	r.playStop(ctx)
	r.playKill(ctx)
	r.playAdoption(ctx)
	r.check(ctx, "pushes", checkTimeout, nil, r.checkPushes)
	r.check(ctx, "orch-calls", checkTimeout, nil, r.checkCalls)
}

// prepare makes the deployment: its id and instances, their configs, the root of its
// credentials, the map network and the runtime.
func (r *runner) prepare(ctx context.Context) error {
	r.deployment = "conform-" + randomHex(4)
	r.a, r.b, r.w, r.x = r.deployment+"-a", r.deployment+"-b", r.deployment+"-w", r.deployment+"-x"
	for i, id := range []string{r.a, r.b, r.w, r.x} {
		// Small worlds: a world's size costs the map time and memory, not the contract.
		cfg, err := mapgen.Complete(id, mapID, fmt.Appendf(nil, `{"seed": %d, "bounds": {"width": 400, "height": 400}}`, 101+i))
		if err != nil {
			return err
		}
		world, err := mapgen.Generate(cfg)
		if err != nil {
			return err
		}
		if r.configs[id], err = json.Marshal(cfg); err != nil {
			return err
		}
		r.hashes[id] = world.Hash()
		if id == r.a {
			r.spawnA = world.Spawns[0]
		}
	}
	dir, err := os.MkdirTemp("", "mapyard-conform-")
	if err != nil {
		return fmt.Errorf("a directory for the run's database: %w (set TMPDIR to a writable one; in a container, --tmpfs /tmp)", err)
	}
	r.dir = dir
	root, err := keys.NewRoot(randomHex(24))
	if err != nil {
		return err
	}
	mapNet, err := docker.EnsureNetwork(ctx, r.cli, r.opts.Network, r.deployment)
	if err != nil {
		return err
	}
	r.api = newProbeAPI(r.cli)
	rt := docker.NewRuntime(r.api, docker.Template{
		Network: r.opts.Network, Gateway: mapNet.Gateway, Deployment: r.deployment,
		MemoryMB: mapMemoryMB, NanoCPUs: mapNanoCPUs, PidsLimit: mapPidsLimit,
	})
	r.setup = &orchestratorSetup{
		dbPath: filepath.Join(dir, "mapyard.db"), root: root, rt: rt, gateway: mapNet.Gateway, tap: newTap(r.opts.Log),
		defaultID: r.a, defaultMap: mapID, defaultConfig: r.configs[r.a], options: r.opts, log: r.opts.Log, env: mapEnv,
	}
	return nil
}

// mapEnv is every map container's environment as the orchestrator builds it, with the
// tap's port as the control listener's, and shorter periods (see DefaultHeartbeatMS).
func mapEnv(tapPort string) []string {
	return []string{
		mapcontract.EnvOrchURL + "=http://host.docker.internal:" + tapPort,
		fmt.Sprintf("%s=%d", mapcontract.EnvGamePort, docker.MapGamePort),
		fmt.Sprintf("%s=%d", mapcontract.EnvControlPort, docker.MapControlPort),
		fmt.Sprintf("MAP_HEARTBEAT_MS=%d", DefaultHeartbeatMS),
		fmt.Sprintf("MAP_SNAPSHOT_PUSH_MS=%d", DefaultSnapshotPushMS),
	}
}

// cleanup closes the orchestrator and removes every container of the deployment and
// the database. It lists again until nothing is left twice in a row, because a create
// abandoned at shutdown may still complete in the engine.
func (r *runner) cleanup() {
	for _, p := range r.players {
		p.close()
	}
	if r.life != nil {
		_ = r.setup.closeLife(r.life)
		r.life = nil
	}
	if r.deployment != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for quiet := 0; quiet < 2 && ctx.Err() == nil; {
			list, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
				filters.Arg("label", docker.LabelDeployment+"="+r.deployment))})
			if err != nil {
				break
			}
			if len(list) == 0 {
				quiet++
			}
			for _, c := range list {
				err := r.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
				if err != nil && !errdefs.IsNotFound(err) && !errdefs.IsConflict(err) {
					r.opts.Log.Warn("remove conformance container", "container", c.ID, "err", err)
				}
			}
			if quiet < 2 {
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}
	}
	if r.dir != "" {
		_ = os.RemoveAll(r.dir)
	}
}

// openFirstLife marks the writable probe's container name, then opens the
// orchestrator: the default instance (with its whole config, like any other) and a
// warm-pool container start.
func (r *runner) openFirstLife(ctx context.Context) error {
	r.api.makeWritable(docker.ContainerName(r.deployment, r.w))
	l, err := r.setup.openLife(ctx)
	if err != nil {
		return err
	}
	r.life = l
	return nil
}

// check runs one check with its own deadline and records its result. A check whose
// needs failed is not run and fails with the reason.
func (r *runner) check(ctx context.Context, name string, timeout time.Duration, needs []string, fn func(context.Context) error) bool {
	start := time.Now()
	res := Result{Name: name}
	for _, n := range needs {
		if r.failed[n] {
			res.Detail = "not run: " + n + " failed"
			break
		}
	}
	if res.Detail == "" && ctx.Err() != nil {
		res.Detail = "not run: " + context.Cause(ctx).Error()
	}
	if res.Detail == "" {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err := fn(cctx)
		cancel()
		if err != nil {
			res.Detail = err.Error()
		} else {
			res.Pass = true
		}
	}
	res.Ms = time.Since(start).Milliseconds()
	r.record(res)
	return res.Pass
}

// record adds a result to the report.
func (r *runner) record(res Result) {
	if r.done[res.Name] {
		panic("conform: check " + res.Name + " reported twice")
	}
	r.done[res.Name] = true
	if res.Pass {
		r.report.Passed++
	} else {
		r.report.Failed++
		r.failed[res.Name] = true
	}
	r.report.Checks = append(r.report.Checks, res)
	if r.onResult != nil {
		r.onResult(res)
	}
}

// randomHex returns n random bytes in hex: deployment ids, secrets.
func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("conform: crypto/rand failed: " + err.Error()) // never happens on supported systems
	}
	return hex.EncodeToString(b)
}
