package conform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/admission"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/keys"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
	"github.com/mapyard/mapyard/orchestrator/supervise"
)

// ticketTTL is how long the run's join tickets are valid (a host's: 10 s).
const ticketTTL = 2 * time.Minute

// life is one run of the orchestrator against the image: the very parts
// cmd/orchestrator wires (its Main.Run), on a database file, a root and a deployment
// that outlive it, so that closing one life and opening the next is an orchestrator
// restart the maps live through.
type life struct {
	db     *sqlite.DB
	sup    *supervise.Supervisor
	adm    *admission.Service
	http   *httpapi.Server
	opened time.Time
}

// orchestratorSetup is what every life of a run shares.
type orchestratorSetup struct {
	dbPath     string
	root       *keys.Root
	rt         *docker.Runtime
	gateway    string
	tap        *tap
	defaultID  string
	defaultMap string
	// defaultConfig is the default instance's whole config, stored as the wanted
	// instance's before the first life starts it.
	defaultConfig json.RawMessage
	env           func(tapPort string) []string
	options       Options
	log           *slog.Logger
}

// openLife opens the database, the control listener (behind the tap) and the
// supervisor, which adopts what a previous life left running and starts the rest.
func (s *orchestratorSetup) openLife(ctx context.Context) (_ *life, err error) {
	// l is not the named result: a failed open returns nil, and the deferred close
	// below must still close what l holds.
	l := &life{db: sqlite.NewDB(s.dbPath), opened: time.Now()}
	l.db.Logger = s.log
	if err := l.db.Open(); err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	if err := s.wantDefault(ctx, l.db); err != nil {
		return nil, err
	}
	o := supervise.DefaultOptions()
	o.DefaultInstanceID, o.DefaultMapID = s.defaultID, s.defaultMap
	// Every map of the run runs the image under test, and only it.
	o.Image, o.Images, o.DefaultMapImage = s.options.Image, nil, ""
	o.StopGrace = s.options.StopGrace
	o.StartTimeout = s.options.StartTimeout
	o.HeartbeatTimeout = s.options.HeartbeatTimeout
	o.ProbeInterval = time.Second
	o.OrphanGrace = 300 * time.Millisecond
	o.PoolSize = 1
	// A handed-out pool map stays in its container: a move to a new one would replace
	// a container the checks are looking at.
	o.Rehome = 0
	l.sup = supervise.New(s.rt, mapcontract.NewMapClient(2*time.Second), s.root, s.log, o)
	l.sup.Store = l.db
	l.adm = admission.NewService(s.root, l.db, l.sup, s.defaultID, s.log)
	l.adm.DefaultMapID = s.defaultMap
	// A ticket of the run is presented again checks later (ticket-used), after checks
	// that may wait out their time on a map that fails them: it must still be valid then,
	// or the map would be refused ticket_expired for another check's failure.
	l.adm.JoinTTL = ticketTTL
	l.http = httpapi.NewServer(l.sup, l.adm, l.db, s.root, s.log)
	l.http.Callers = l.sup
	l.http.PublicAddr, l.http.ControlAddr = "127.0.0.1:0", "127.0.0.1:0"
	if err := l.http.Open(); err != nil {
		l.http = nil
		return nil, err
	}
	if err := s.tap.open(s.gateway, l.http.ControlURL()); err != nil {
		if errors.Is(err, syscall.EADDRNOTAVAIL) {
			err = fmt.Errorf("%w: the kit listens on the map network's gateway, an address of the engine's host; "+
				"run it on that host, or in a container with --network host", err)
		}
		return nil, err
	}
	l.sup.Env = s.env(s.tap.port())
	if err := l.sup.Open(ctx); err != nil {
		return nil, fmt.Errorf("open supervisor: %w", err)
	}
	if err := l.adm.Open(); err != nil {
		return nil, fmt.Errorf("open admission: %w", err)
	}
	return l, nil
}

// wantDefault stores the default instance with its config unless the database holds
// it already (a later life).
func (s *orchestratorSetup) wantDefault(ctx context.Context, db *sqlite.DB) error {
	wanted, err := db.ListInstances(ctx)
	if err != nil {
		return err
	}
	for _, w := range wanted {
		if w.ID == s.defaultID {
			return nil
		}
	}
	return db.PutInstance(ctx, orchestrator.WantedInstance{ID: s.defaultID, MapID: s.defaultMap, Config: s.defaultConfig,
		Status: orchestrator.StatusRunning, CreatedAt: time.Now()})
}

// close stops the life as an orchestrator shutting down does: the listeners (and the
// tap in front of them) first, then the supervisor and the database. Map containers
// keep running; the next life adopts them.
func (s *orchestratorSetup) closeLife(l *life) error {
	s.tap.close()
	return l.close()
}

// close closes what the life opened, in the order an orchestrator shuts down.
func (l *life) close() error {
	var errs []error
	if l.adm != nil {
		errs = append(errs, l.adm.Close())
	}
	if l.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, l.http.Close(ctx))
		cancel()
	}
	if l.sup != nil {
		errs = append(errs, l.sup.Close())
	}
	errs = append(errs, l.db.Close())
	return errors.Join(errs...)
}

// waitInstance polls the supervisor until instance id satisfies cond (the supervisor
// has no change feed; its list is in memory and cheap to read).
func (l *life) waitInstance(ctx context.Context, id string, what string, cond func(orchestrator.Instance) bool) (orchestrator.Instance, error) {
	var inst orchestrator.Instance
	err := poll(ctx, what, func() bool {
		var err error
		inst, err = l.sup.Instance(id)
		return err == nil && cond(inst)
	})
	return inst, err
}

// poll asks cond every 25 ms until it holds or ctx ends.
func poll(ctx context.Context, what string, cond func() bool) error {
	t := time.NewTicker(25 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not seen within the check's time", what)
		case <-t.C:
		}
	}
	return nil
}

// probePushEnv sets the writable probe's periodic pushes far beyond a run.
const probePushEnv = "MAP_SNAPSHOT_PUSH_MS=600000"

// probeAPI is the Docker engine as the runtime uses it, with one seam: the containers
// named in writable are created with a writable root file system, and each one's
// changes (`docker diff`) are read when it has stopped and before it is removed. A
// read-only root hides a write (it fails); a writable one shows it. Such a probe also
// pushes no state periodically (probePushEnv), so what it pushes once stopping is the
// stop's own push. Every other container is created exactly as the orchestrator
// creates it.
type probeAPI struct {
	*client.Client

	mu       sync.Mutex
	writable map[string]bool                         // container names
	probes   map[string]bool                         // ids of containers created writable
	diffs    map[string][]container.FilesystemChange // by id, read at stop
	diffErrs map[string]error
}

var _ docker.API = (*probeAPI)(nil)

// newProbeAPI wraps cli; no container is a probe until makeWritable names it.
func newProbeAPI(cli *client.Client) *probeAPI {
	return &probeAPI{Client: cli, writable: map[string]bool{}, probes: map[string]bool{},
		diffs: map[string][]container.FilesystemChange{}, diffErrs: map[string]error{}}
}

// makeWritable has the container called name created with a writable root.
func (p *probeAPI) makeWritable(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writable[name] = true
}

// ContainerCreate creates a container, with a writable root when its name is marked.
func (p *probeAPI) ContainerCreate(ctx context.Context, cfg *container.Config, host *container.HostConfig, net *network.NetworkingConfig, platform *ocispec.Platform, name string) (container.CreateResponse, error) {
	p.mu.Lock()
	probe := p.writable[name]
	p.mu.Unlock()
	if probe && host != nil && cfg != nil {
		h, c := *host, *cfg
		h.ReadonlyRootfs = false
		// No periodic pushes: a push after SIGTERM is then the one the stop makes.
		c.Env = append(slices.DeleteFunc(slices.Clone(c.Env), func(kv string) bool {
			return strings.HasPrefix(kv, "MAP_SNAPSHOT_PUSH_MS=")
		}), probePushEnv)
		host, cfg = &h, &c
	}
	res, err := p.Client.ContainerCreate(ctx, cfg, host, net, platform, name)
	if err == nil && probe {
		p.mu.Lock()
		p.probes[res.ID] = true
		p.mu.Unlock()
	}
	return res, err
}

// ContainerStop stops a container and, for a writable probe, reads its changes.
func (p *probeAPI) ContainerStop(ctx context.Context, id string, opts container.StopOptions) error {
	err := p.Client.ContainerStop(ctx, id, opts)
	p.mu.Lock()
	probe := p.probes[id]
	p.mu.Unlock()
	if probe {
		changes, derr := p.Client.ContainerDiff(ctx, id)
		p.mu.Lock()
		p.diffs[id], p.diffErrs[id] = changes, derr
		p.mu.Unlock()
	}
	return err
}

// diff returns the changes read when container id stopped; ok is false when it was not
// read (the container was never stopped through the runtime).
func (p *probeAPI) diff(id string) (changes []container.FilesystemChange, ok bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	changes, ok = p.diffs[id]
	return changes, ok, p.diffErrs[id]
}
