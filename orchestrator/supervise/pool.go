package supervise

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/orchestrator"

	"github.com/mapyard/mapyard/orchestrator/keys"
)

// poolMember is one blank warm-pool container. It registers under its pool id
// (pool-<hex>); handing it an instance tells the runtime (Assign), which in Docker
// renames it to the instance's container name.
type poolMember struct {
	id          string // pool-<hex>
	image       string // handed only to instances of this image
	node        string // the node it was started on (Nodes), "" on one engine
	containerID string
	started     bool // the runtime's Start returned
	startedAt   time.Time
	registered  bool // the blank map registered
	ports       Ports
	ident       keys.Identity // whose credentials the container holds
}

// ready reports whether m can be handed out: started and registered, in either order.
func (m *poolMember) ready() bool { return m.started && m.registered }

// PoolStatus is what the admin API shows of the warm pool: in all, and by image.
type PoolStatus struct {
	Size   int               `json:"size"`
	Ready  int               `json:"ready"`
	Want   int               `json:"want"`
	Images []PoolImageStatus `json:"images"`
}

// PoolImageStatus is the warm pool's spares of one image, on every node. Want is
// ORCH_WARM_POOL_SIZE a node, and 0 for an image the
// pool keeps no spares of (any more): one whose maps have not started, or that the
// engine lacked (Missing).
type PoolImageStatus struct {
	Image   string `json:"image"`
	Size    int    `json:"size"`
	Ready   int    `json:"ready"`
	Want    int    `json:"want"`
	Missing bool   `json:"missing,omitempty"`
}

// Pool reports the warm pool's size, how many members are ready for handout, and the
// same by image.
func (s *Supervisor) Pool() PoolStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	byImage := map[string]*PoolImageStatus{}
	get := func(img string) *PoolImageStatus {
		if byImage[img] == nil {
			byImage[img] = &PoolImageStatus{Image: img, Missing: s.lacking[img]}
		}
		return byImage[img]
	}
	var st PoolStatus
	want := s.PoolSize * len(s.nodesLocked())
	for _, img := range s.poolImagesLocked() {
		get(img).Want = want
		st.Want += want
	}
	for _, m := range s.pool {
		is := get(m.image)
		is.Size++
		st.Size++
		if m.ready() {
			is.Ready++
			st.Ready++
		}
	}
	for img := range s.lacking {
		get(img)
	}
	for _, is := range byImage {
		st.Images = append(st.Images, *is)
	}
	sort.Slice(st.Images, func(i, j int) bool { return st.Images[i].Image < st.Images[j].Image })
	return st
}

// kickPool asks the pool loop to refill without blocking.
func (s *Supervisor) kickPool() {
	select {
	case s.poolKick <- struct{}{}:
	default:
	}
}

// poolLoop keeps PoolSize blank containers of each image the pool serves (see
// poolImagesLocked) on each node that can take a map (see Nodes) until ctx ends,
// refilling when kicked and retrying failures with a delay. An image the engine lacks
// is not retried until a map of it starts; a node an image's constraints exclude is
// not tried for that image for a while. On a runtime with many nodes, the list of
// nodes is read again every few seconds.
func (s *Supervisor) poolLoop(ctx context.Context) {
	var refresh <-chan time.Time
	if _, ok := s.Runtime.(Nodes); ok {
		t := time.NewTicker(nodesRefresh)
		defer t.Stop()
		refresh = t.C
	}
	s.kickPool()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.poolKick:
		case <-refresh:
		}
		s.refreshNodes(ctx)
		for ctx.Err() == nil {
			s.mu.Lock()
			image, node, short := s.shortSlotLocked()
			s.mu.Unlock()
			if !short {
				break
			}
			if err := s.addPoolMember(ctx, image, node); err != nil {
				if ctx.Err() != nil {
					return
				}
				if errors.Is(err, ErrImageMissing) && node == "" {
					s.mu.Lock()
					s.lacking[image] = true
					s.mu.Unlock()
					s.Log.Warn("warm pool: image missing on the engine; no spares of it until a map of it starts", "image", image, "err", err)
					continue
				}
				// A node without the image (the others may have it), or one the image's
				// constraints exclude: left alone for a while.
				if errors.Is(err, ErrUnschedulable) || errors.Is(err, ErrImageMissing) {
					s.mu.Lock()
					s.unplaceable[[2]string{image, node}] = s.Now().Add(unplaceableRetry)
					s.mu.Unlock()
					s.Log.Warn("warm pool: no spare of this image on this node (its constraints, or the node lacks it); trying again later", "image", image, "node", node, "err", err)
					continue
				}
				s.Log.Warn("warm pool refill failed; retrying", "image", image, "node", node, "err", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(2 * time.Second):
				}
			}
		}
	}
}

// How often the pool reads a runtime's nodes again, and how long it leaves an image
// alone on a node that its constraints excluded.
const (
	nodesRefresh     = 5 * time.Second
	unplaceableRetry = 30 * time.Second
)

// refreshNodes reads the nodes that can take a map now from a runtime with many.
func (s *Supervisor) refreshNodes(ctx context.Context) {
	n, ok := s.Runtime.(Nodes)
	if !ok {
		return
	}
	list, err := n.Nodes(ctx)
	if err != nil {
		s.Log.Warn("warm pool: list the runtime's nodes", "err", err)
		return
	}
	s.mu.Lock()
	s.nodes = append([]string{}, list...)
	s.mu.Unlock()
}

// nodesLocked are the nodes the pool keeps spares on: one unnamed node on a runtime
// without Nodes. The caller holds s.mu.
func (s *Supervisor) nodesLocked() []string {
	if s.nodes == nil {
		return []string{""}
	}
	return s.nodes
}

// shortSlotLocked returns the first image and node with fewer than PoolSize spares,
// and whether there is one. The caller holds s.mu.
func (s *Supervisor) shortSlotLocked() (image, node string, short bool) {
	count := map[[2]string]int{}
	for _, m := range s.pool {
		count[[2]string{m.image, m.node}]++
	}
	now := s.Now()
	for _, img := range s.poolImagesLocked() {
		for _, n := range s.nodesLocked() {
			slot := [2]string{img, n}
			if count[slot] < s.PoolSize && !now.Before(s.unplaceable[slot]) {
				return img, n, true
			}
		}
	}
	return "", "", false
}

// addPoolMember starts one blank container of image for the pool, on node.
func (s *Supervisor) addPoolMember(ctx context.Context, image, node string) error {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	m := &poolMember{id: mapgen.PoolIDPrefix + hex.EncodeToString(b[:]), image: image, node: node}
	ident, creds, err := s.mint(m.id)
	if err != nil {
		return err
	}
	m.ident = ident
	// A handed-out pool container keeps these credentials: the supervisor knows which
	// instance it runs (InstanceOf), so it acts for that instance only. Nothing in its
	// environment names an instance or a map: it is told both at handout.
	spec := Spec{InstanceID: m.id, Image: image, Pool: true, Generation: ident.Generation, KeyID: s.Credentials.KeyID(), Node: node,
		Env: append(append(append([]string(nil), s.Env...), creds...), mapcontract.EnvPoolID+"="+m.id)}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// In the pool before it starts: the blank map may register before Start returns.
	s.mu.Lock()
	s.pool[m.id] = m
	s.mu.Unlock()
	c, err := s.Runtime.Start(cctx, spec)
	if err != nil {
		s.dropPoolMember(m.id)
		return err
	}
	s.mu.Lock()
	m.containerID, m.ports, m.started, m.startedAt = c.ID, c.Ports, true, s.Now()
	if m.ready() {
		s.poolGaugesLocked()
	}
	s.mu.Unlock()
	s.Log.Info("warm pool container started", "pool", m.id, "image", image, "node", node, "container", shortID(c.ID))
	return nil
}

func (s *Supervisor) dropPoolMember(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.pool[id]; ok {
		delete(s.pool, id)
		s.poolGaugesLocked()
	}
}

// poolGaugesLocked sets the ready gauges, in all and by image. The caller holds s.mu.
func (s *Supervisor) poolGaugesLocked() {
	n, byImage := 0, map[string]int{}
	for _, img := range s.poolImagesLocked() {
		byImage[img] = 0
	}
	for _, m := range s.pool {
		if _, ok := byImage[m.image]; !ok {
			byImage[m.image] = 0
		}
		if m.ready() {
			n++
			byImage[m.image]++
		}
	}
	s.Metrics.PoolReady.Set(float64(n))
	for img, k := range byImage {
		s.Metrics.PoolImageReady.WithLabelValues(img).Set(float64(k))
	}
}

// poolReady records a blank map's registration.
func (s *Supervisor) poolReady(r orchestrator.MapRegistration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.pool[r.InstanceID]
	if !ok {
		return apierr.Errorf(apierr.ENOTFOUND, "no warm pool container %q (handed out or removed)", r.InstanceID)
	}
	if !m.registered {
		s.Log.Info("warm pool container registered", "pool", m.id, "image", m.image, "container", shortID(m.containerID))
	}
	m.registered = true
	s.poolGaugesLocked()
	return nil
}

// takePoolLocked removes and returns a ready pool member of image, or nil, and asks
// for a refill. Of spares on several nodes it takes one on the node that runs the
// fewest maps, so that maps spread over the nodes, and none on node avoid (see
// instance.avoid) unless there is no other. The caller holds s.mu.
func (s *Supervisor) takePoolLocked(image, avoid string) *poolMember {
	load := map[string]int{}
	for _, in := range s.instances {
		if in.ContainerID != "" {
			load[in.ports.Node]++
		}
	}
	var best *poolMember
	for _, m := range s.pool {
		if !m.ready() || m.image != image {
			continue
		}
		if best == nil || better(m, best, load, avoid) {
			best = m
		}
	}
	if best == nil {
		return nil
	}
	delete(s.pool, best.id)
	s.poolGaugesLocked()
	s.kickPool()
	return best
}

// better reports whether spare m is a better handout than spare than: off the avoided
// node, then on the node running fewer maps, then by id.
func better(m, than *poolMember, load map[string]int, avoid string) bool {
	if ma, ta := avoid != "" && m.node == avoid, avoid != "" && than.node == avoid; ma != ta {
		return ta
	}
	if load[m.node] != load[than.node] {
		return load[m.node] < load[than.node]
	}
	return m.id < than.id
}

// handout turns pool member m into instance in: the map is told its instance and
// MapConfig, the instance is ready at once, and the runtime is told in the background
// (Assign). Should the orchestrator die before that, adoption still finds the
// instance: it asks a pool container's /health which instance it runs.
func (s *Supervisor) handout(ctx context.Context, in *instance, m *poolMember) error {
	start := s.Now()
	req, err := s.startRequest(in)
	if err != nil {
		return err
	}
	s.mu.Lock()
	in.ContainerID, in.ports, in.ident, in.pooled = m.containerID, m.ports, m.ident, true
	in.GamePort, in.ControlPort, in.GameAddr = m.ports.Game, m.ports.Control, m.ports.GameAddr
	s.mu.Unlock()
	if err := s.RPC.StartInstance(ctx, m.ports.ControlURL(), s.orchCredential(m.ident), req); err != nil {
		return fmt.Errorf("start-instance on pool container %s: %w", m.id, err)
	}
	s.mu.Lock()
	now := s.Now()
	in.Registered, in.lastBeat, in.lastActive, in.probeFails = true, now, now, 0
	s.Metrics.Handouts.Inc()
	s.apply(in, evHandOut, fmt.Sprintf("handed warm pool container %s", m.id))
	s.mu.Unlock()
	s.Log.Info("warm pool handout", "instance", in.ID, "pool", m.id, "container", shortID(m.containerID), "tookMs", ms(now.Sub(start)))
	s.assignLater(in.ID, m.containerID)
	return nil
}

// assignLater tells the runtime in the background that a handed-out pool container
// now runs instanceID (in Docker a rename, which costs milliseconds of engine time).
func (s *Supervisor) assignLater(instanceID, containerID string) {
	s.group.Go(func() error {
		ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
		defer cancel()
		if err := s.Runtime.Assign(ctx, containerID, instanceID); err != nil {
			s.Log.Warn("assign handed-out pool container", "instance", instanceID, "container", shortID(containerID), "err", err)
		}
		return nil
	})
}

// poolExitedLocked handles the exit of a pool container: it leaves the pool, is
// removed, and the pool is refilled. It reports whether id was a pool member.
func (s *Supervisor) poolExitedLocked(id string, code int) bool {
	for pid, m := range s.pool {
		if m.containerID != id || !m.started {
			continue
		}
		delete(s.pool, pid)
		s.poolGaugesLocked()
		s.Log.Warn("warm pool container exited", "pool", pid, "image", m.image, "exitCode", code)
		s.group.Go(func() error {
			if err := s.Runtime.Remove(context.WithoutCancel(s.ctx), id); err != nil {
				s.Log.Warn("remove exited pool container", "pool", pid, "err", err)
			}
			return nil
		})
		s.kickPool()
		return true
	}
	return false
}
