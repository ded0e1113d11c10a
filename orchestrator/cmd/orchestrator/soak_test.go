package main

// The soak: the kit held for a while under bots, portals, pickups, joins, leaves and
// dropped sockets while a seeded schedule of faults kills its processes, sampled every
// few seconds and checked at the end for leaks and losses (docs/operations.md, "Soak").

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/edge"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// The soak's defaults: MAPYARD_SOAK_DURATION, MAPYARD_SOAK_BOTS (W1 bots per map) and
// MAPYARD_SOAK_SEED override them.
const (
	defaultSoakDuration = 3 * time.Minute
	defaultSoakBots     = 20
	soakSampleEvery     = 10 * time.Second
	// soakPickers and soakWalkers are the saved characters that pick items up on the
	// loot map and walk between the two portal maps.
	soakPickers = 2
	soakWalkers = 2
)

// soak is one run: the kit, its three maps, the players and what they saw.
type soak struct {
	t     *testing.T
	k     *kit
	seed  uint64
	dur   time.Duration
	start time.Time
	// loot has items and a portal to hall; hall a portal back; field is plain.
	loot, hall, field mapgen.MapConfig
	edgeAddr          string
	control           string // the control listener, the same across restarts
	orchPID           atomic.Int64
	ground            []items.Item // the loot map's items as seeded
	swarms            map[string]*client.Swarm
	pickers           []*soakPicker
	walkers           []*soakWalker
	traders           *soakTraders
	// faults are the windows in which a refused join is expected.
	mu       sync.Mutex
	faults   []*soakFault
	joins    int
	refusals []string // joins refused outside every fault window
	drops    int      // sockets broken on purpose
	resumed  int      // of those, resumed as the same character
	samples  []soakSample
	after    *soakSample // once the players left, before the orchestrator stops
}

// TestSoak runs the kit for MAPYARD_SOAK_DURATION (3 minutes by default, as in make
// test; make soak runs 10 minutes or DURATION): W1 bots on three maps, saved characters
// picking items up and walking through portals back and forth, guests and saved
// characters joining and leaving, sockets dropped and resumed, and a seeded fault
// schedule (a map's container killed, the orchestrator killed with SIGKILL and started
// again on its database, the edge replaced on its port), each fault's recovery held to
// its bound. It samples every process every 10 s and writes a report to
// bench-results/soak-<time>/; at the end every acknowledged pickup is held exactly once,
// every saved character stands where its last push put it, the database passes
// integrity_check and nothing of the deployment is left behind.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak runs for minutes")
	}
	s := &soak{t: t, dur: envDuration(t, "MAPYARD_SOAK_DURATION", defaultSoakDuration), swarms: map[string]*client.Swarm{}}
	s.seed = uint64(time.Now().UnixNano())
	if v := os.Getenv("MAPYARD_SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("MAPYARD_SOAK_SEED=%q: %v", v, err)
		}
		s.seed = n
	}
	bots := defaultSoakBots
	if v := os.Getenv("MAPYARD_SOAK_BOTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("MAPYARD_SOAK_BOTS=%q: want a count", v)
		}
		bots = n
	}
	schedule := soakSchedule(s.seed, s.dur)
	t.Logf("soak: %s, seed %d (MAPYARD_SOAK_SEED=%d reproduces this schedule), %d W1 bots on each of 3 maps", s.dur, s.seed, s.seed, bots)
	for _, f := range schedule {
		t.Logf("soak: fault at %s: %s", f.At, f.Kind)
	}

	s.open(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	s.start = time.Now()
	for _, m := range []mapgen.MapConfig{s.loot, s.hall, s.field} {
		s.swarms[m.InstanceID] = s.connectSwarm(t, m, bots)
	}
	s.enterPlayers(t)
	run := func(f func(context.Context)) { wg.Add(1); go func() { defer wg.Done(); f(ctx) }() }
	for _, sw := range s.swarms {
		run(sw.Drive)
	}
	for _, p := range s.pickers {
		run(p.run)
	}
	for _, w := range s.walkers {
		run(w.run)
	}
	run(s.traders.run)
	run(s.churn)
	run(s.dropSockets)
	run(s.sample)

	for _, f := range schedule {
		if wait := time.Until(s.start.Add(f.At)); wait > 0 {
			time.Sleep(wait)
		}
		s.inject(t, f)
	}
	time.Sleep(time.Until(s.start.Add(s.dur)))
	cancel()
	wg.Wait()
	s.finish(t)
}

// envDuration reads a duration from the environment, or def.
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 2*time.Minute {
		t.Fatalf("%s=%q: want a duration of 2 minutes or more", name, v)
	}
	return d
}

// open starts the kit (its edge on a port it keeps across replacements) and the three
// maps: loot, strewn with items, with a portal to hall and back, and field.
func (s *soak) open(t *testing.T) {
	// The database on a tmpfs of its own (the full disk), the test switches on (a slow
	// orchestrator, a map out of memory) and a memory limit a map's allocation reaches
	// in a moment.
	s.k = newKit(t, "ORCH_MAP_NETWORK=net-"+randomHex(t, 4), "ORCH_CHECKPOINT_MS=500", "MAP_SNAPSHOT_PUSH_MS=1000",
		"ORCH_DB_PATH="+filepath.Join(mountDataVolume(t), "mapyard.db"), "ORCH_ALLOW_FAULT_INJECTION=1", "ORCH_MAP_MEMORY_MB=128")
	s.orchPID.Store(int64(s.k.orch.cmd.Process.Pid))
	s.control = s.k.orch.control
	// The kit's first edge listens on a port of its choosing; the soak's edge keeps one
	// port, so that players come back to it after a replacement.
	s.k.edge.Close(context.Background())
	s.edgeAddr = "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	s.k.edge = s.openEdge(t)
	s.k.ws = "ws" + s.k.edge.PublicURL()[len("http"):]
	// The edge of the moment is closed at the end; each replaced one was closed when
	// it was replaced (a cleanup per edge would keep every one of them alive, and the
	// test process's memory would grow with the edge restarts).
	t.Cleanup(func() { s.k.edge.Close(context.Background()) })

	s.loot, s.hall, s.field = lootMap(t, s.k.deployment+"-loot", 200, 15), smallMap(t, s.k.deployment+"-hall"), smallMap(t, s.k.deployment+"-field")
	s.loot.GenerationRules.Portals = []mapgen.PortalRule{{TargetMapID: s.hall.MapID, Count: 1}}
	s.hall.GenerationRules.Portals = []mapgen.PortalRule{{TargetMapID: s.loot.MapID, Count: 1}}
	for _, m := range []mapgen.MapConfig{s.loot, s.hall, s.field} {
		postMap(t, s.k.orch.control, s.k.secret, m, "MAP_FAULT_ALLOCATE_ON_SIGUSR1=true")
		waitInstance(t, s.k.orch.control, s.k.secret, m.InstanceID, orchestrator.StateReady, 60*time.Second)
	}
}

// openEdge opens an edge on the soak's port in front of the orchestrator.
func (s *soak) openEdge(t *testing.T) *edge.Edge {
	t.Helper()
	cfg := testEdgeConfig(s.edgeAddr, s.k.orch.control, s.k.orch.edgeCredential)
	cfg.MaxConns = 2000
	e, err := edge.New(cfg, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Open(); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e.PublicURL()+"/readyz", http.StatusOK, 30*time.Second)
	return e
}

// baseURL is the edge's public origin, the same across replacements.
func (s *soak) baseURL() string { return "http://" + s.edgeAddr }

// connectSwarm joins n W1 bots through the edge onto map m, each a saved character
// placed at random on it, resuming a dropped socket and joining anew when a resume
// fails.
func (s *soak) connectSwarm(t *testing.T, m mapgen.MapConfig, n int) *client.Swarm {
	t.Helper()
	sw := &client.Swarm{
		JoinURL: s.baseURL(), N: n, JoinPerSec: 20, Seed: s.seed ^ uint64(len(s.swarms)+1), Rejoin: true,
		Options: client.Options{Resume: true, NoAutoAck: true},
		Spread: &client.Spread{ControlURL: s.k.orch.control, Secret: s.k.mapCred(t, s.k.def),
			Width: float64(m.Bounds.Width) - 1, Height: float64(m.Bounds.Height) - 1, IntoMap: m.MapID, IntoInstance: m.InstanceID},
	}
	if err := sw.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sw.JoinFailures != 0 {
		t.Fatalf("%d of %d bots could not join %s: %v", sw.JoinFailures, n, m.InstanceID, sw.JoinError)
	}
	t.Cleanup(sw.Close)
	return sw
}

// enterPlayers puts the pickers on the loot map, each with a stripe of its items, and
// the walkers beside the loot map's portal.
func (s *soak) enterPlayers(t *testing.T) {
	ground := seededItems(t, s.k.dbPath, s.loot)
	s.ground = ground
	lw, hw := generate(t, s.loot), generate(t, s.hall)
	portal := lw.Portals[0]
	// The traders' item: the one lowest on the map (highest y) away from the portal,
	// kept out of the pickers' lists.
	var traded items.Item
	for _, it := range ground {
		if itemDistance(it, float64(portal.X)/100, float64(portal.Y)/100) > float64(portal.Radius)/100+3 && it.Place.Y > traded.Place.Y {
			traded = it
		}
	}
	for i := range soakPickers {
		lo, hi := float64(i)*200/soakPickers, float64(i+1)*200/soakPickers
		p := &soakPicker{s: s, authKey: testutil.NewAuthKey(t), picker: picker{sent: map[string]time.Time{}, seqs: map[uint64]string{}, acked: map[string]time.Time{}, refused: map[string]string{}}}
		for _, it := range ground {
			// Not the items by the portal, which would carry the picker away.
			if x := float64(it.Place.X) / 100; x >= lo+1 && x < hi-1 && it.ID != traded.ID && itemDistance(it, float64(portal.X)/100, float64(portal.Y)/100) > float64(portal.Radius)/100+3 {
				p.todo = append(p.todo, it)
			}
		}
		p.next = p.nearest((lo+hi)/2, 100)
		p.c = s.k.enterAtAs(t, p.authKey, s.loot, float64(p.next.Place.X)/100, float64(p.next.Place.Y)/100+0.5, `{}`, s.playerOptions(p.authKey))
		p.character = p.c.Welcome().CharacterID
		s.pickers = append(s.pickers, p)
	}
	for range soakWalkers {
		w := &soakWalker{s: s, authKey: testutil.NewAuthKey(t), portals: map[string]mapgen.Portal{
			s.loot.MapID: lw.Portals[0], s.hall.MapID: hw.Portals[0]}, other: map[string]string{s.loot.MapID: s.hall.MapID, s.hall.MapID: s.loot.MapID}}
		p := lw.Portals[0]
		w.c = s.k.enterAtAs(t, w.authKey, s.loot, float64(p.X-p.Radius)/100-1, float64(p.Y)/100, `{}`, s.playerOptions(w.authKey))
		w.character = w.c.Welcome().CharacterID
		s.walkers = append(s.walkers, w)
	}
	tx, ty := float64(traded.Place.X)/100, float64(traded.Place.Y)/100
	s.traders = &soakTraders{s: s, item: traded, x: tx, y: ty, acked: map[string]int{}, doubt: map[string]int{}, seen: map[string]bool{}}
	for i, slot := range []**soakTrader{&s.traders.a, &s.traders.b} {
		tr := &soakTrader{authKey: testutil.NewAuthKey(t)}
		tr.c = s.k.enterAtAs(t, tr.authKey, s.loot, tx+float64(i), ty-0.5, `{}`, s.playerOptions(tr.authKey))
		tr.character = tr.c.Welcome().CharacterID
		*slot = tr
	}
}

// playerOptions make a saved character resume a dropped socket and, when the resume
// fails, join again through the edge as itself.
func (s *soak) playerOptions(authKey string) client.Options {
	ws := "ws" + s.baseURL()[len("http"):]
	return client.Options{Resume: true, Rejoin: func(ctx context.Context) (string, client.Hello, error) {
		// A join while the character's map restarts may go to the default map (seed
		// 000's failure policy, docs/admission.md): wait until the soak's maps are
		// ready, as a player would retry, so that it comes back where it was.
		if err := s.mapsReady(ctx); err != nil {
			return "", client.Hello{}, err
		}
		var j client.Ticket
		if err := postJoin(ctx, s.baseURL(), fmt.Sprintf(`{"authKey":%q}`, authKey), &j); err != nil {
			return "", client.Hello{}, err
		}
		return ws + j.WS, client.Hello{Ticket: j.Ticket}, nil
	}}
}

// mapsReady waits until the three maps are ready, or ctx ends.
func (s *soak) mapsReady(ctx context.Context) error {
	for {
		ready := 0
		for _, id := range []string{s.loot.InstanceID, s.hall.InstanceID, s.field.InstanceID} {
			var inst orchestrator.Instance
			if httpkit.Call(ctx, http.DefaultClient, http.MethodGet, s.control+httpapi.PathAdminMaps+"/"+id, s.k.secret, nil, &inst) == nil &&
				inst.State == orchestrator.StateReady {
				ready++
			}
		}
		if ready == 3 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the maps to be ready: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// soakPicker is a picker (seed000_durable_test.go) that keeps at it across faults: a
// connection that ends is replaced by a join of the same character.
type soakPicker struct {
	picker
	s       *soak
	authKey string
	lastMap string
	lastX   float64
	lastY   float64
	errs    int
	// unreachable counts the items it could not walk to and left.
	unreachable int
}

// run picks items up until ctx ends, then collects the answers still on their way.
func (p *soakPicker) run(ctx context.Context) {
	x, y := float64(p.next.Place.X)/100, float64(p.next.Place.Y)/100
	p.todo = append(p.todo, p.next)
	for ctx.Err() == nil {
		if p.stranded() {
			break
		}
		p.mu.Lock()
		left := len(p.todo)
		var next items.Item
		if left > 0 {
			next = p.nearest(x, y)
		}
		p.mu.Unlock()
		if left == 0 {
			break
		}
		x, y = float64(next.Place.X)/100, float64(next.Place.Y)/100
		if _, err := steer(p.c, x, y, 1, nil, p.note); err != nil {
			select {
			case <-p.c.Done(): // the connection ended: the item waits for the next one
				p.mu.Lock()
				p.todo = append(p.todo, next)
				p.mu.Unlock()
				p.reconnect(ctx, err)
			default: // the player cannot get there: it leaves the item
				p.unreachable++
				p.s.t.Logf("soak: picker %s leaves item %s: %v", p.character, next.ID, err)
			}
			continue
		}
		seq, err := p.c.Command("items", "pickup", map[string]string{"itemId": next.ID})
		if err != nil {
			p.reconnect(ctx, err)
			continue
		}
		p.mu.Lock()
		p.sent[next.ID], p.seqs[seq] = time.Now(), next.ID
		p.mu.Unlock()
	}
	<-ctx.Done()
	for deadline := time.After(5 * time.Second); ; {
		select {
		case e := <-p.c.Events():
			p.note(e)
			continue
		case <-deadline:
		}
		break
	}
	p.lastMap = p.c.Welcome().InstanceID
	if e, ok := p.c.State().SelfEntity(); ok {
		p.lastX, p.lastY = client.Position(e)
	}
}

// stranded reports whether the picker came back on another map than the loot map (a
// join while the loot map restarted): it stops picking there.
func (p *soakPicker) stranded() bool {
	if id := p.c.Welcome().InstanceID; id != p.s.loot.InstanceID {
		p.s.t.Logf("soak: picker %s is on %s, not on the loot map: it stops picking", p.character, id)
		return true
	}
	return false
}

// reconnect replaces a connection that ended (or a walk that got nowhere) by a join of
// the same character, retrying until ctx ends.
func (p *soakPicker) reconnect(ctx context.Context, cause error) {
	p.errs++
	p.s.t.Logf("soak: picker %s: %v; joining again", p.character, cause)
	p.c = p.s.rejoin(ctx, p.c, p.authKey)
}

// rejoin closes c and connects the saved character of authKey again through the edge,
// retrying every second until ctx ends (then it returns c).
func (s *soak) rejoin(ctx context.Context, c *client.Client, authKey string) *client.Client {
	c.Close()
	opt := s.playerOptions(authKey)
	for ctx.Err() == nil {
		url, hello, err := opt.Rejoin(ctx)
		if err == nil {
			var n *client.Client
			if n, err = client.Dial(ctx, url, hello, opt); err == nil {
				return n
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return c
}

// soakWalker is a saved character walking into the portal of the map it stands on,
// back and forth between loot and hall.
type soakWalker struct {
	s            *soak
	c            *client.Client
	authKey      string
	character    string
	portals      map[string]mapgen.Portal // by the map it stands on
	other        map[string]string
	trips, errs  int
	lastMap      string
	lastX, lastY float64
}

func (w *soakWalker) run(ctx context.Context) {
	for ctx.Err() == nil {
		from := w.c.Welcome().MapID
		p, ok := w.portals[from]
		if !ok {
			// Back on another map (a join while its map restarted): it stays there.
			w.s.t.Logf("soak: walker %s is on %s, with no portal to walk: it stays", w.character, from)
			<-ctx.Done()
			break
		}
		to := w.other[from]
		// A portal takes a player that walks into it: one that came back standing in it
		// (rejoined where it was saved) steps out first.
		px, py, pr := float64(p.X)/100, float64(p.Y)/100, float64(p.Radius)/100
		if e, ok := w.c.State().SelfEntity(); ok {
			if x, y := client.Position(e); near(x, y, px, py, pr+0.5) {
				if _, err := steer(w.c, px-pr-2, py, 0.5, nil, nil); err != nil {
					w.errs++
					w.c = w.s.rejoin(ctx, w.c, w.authKey)
					continue
				}
			}
		}
		ev, err := steer(w.c, px, py, 0, func(e client.Event) bool {
			return (e.Kind == "welcome" && e.Welcome.MapID == to) || (e.Kind == "event" && e.Event.Name == "transfer_denied")
		}, nil)
		if err != nil || ev.Kind != "welcome" {
			w.errs++
			w.s.t.Logf("soak: walker %s from %s: %v (%v); joining again", w.character, from, err, ev)
			w.c = w.s.rejoin(ctx, w.c, w.authKey)
			continue
		}
		w.trips++
		// A pause where it arrived, beside the portal back, before it turns back.
		time.Sleep(2 * time.Second)
	}
	if e, ok := w.c.State().SelfEntity(); ok {
		w.lastMap = w.c.Welcome().InstanceID
		w.lastX, w.lastY = client.Position(e)
	}
}

// churn joins a guest or one of a few saved characters through the edge every second
// or two, lets it play a few seconds and leaves; a join refused outside a fault's
// window fails the soak.
func (s *soak) churn(ctx context.Context) {
	r := rand.New(rand.NewPCG(s.seed, 7))
	keys := make([]string, 5)
	for i := range keys {
		keys[i] = fmt.Sprintf("soak%016x%016x", r.Uint64(), r.Uint64())
	}
	var live []*client.Client
	defer func() {
		for _, c := range live {
			c.Close()
		}
	}()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second + time.Duration(r.Int64N(int64(time.Second)))):
		}
		if len(live) > 3 || (len(live) > 0 && r.IntN(2) == 0) {
			live[0].Close()
			live = live[1:]
			continue
		}
		body := `{}`
		if r.IntN(2) == 0 {
			body = fmt.Sprintf(`{"authKey":%q}`, keys[r.IntN(len(keys))])
		}
		at := time.Now()
		c, err := s.joinOnce(ctx, body)
		s.mu.Lock()
		s.joins++
		if err != nil && !s.inFaultWindow(at) && ctx.Err() == nil {
			s.refusals = append(s.refusals, fmt.Sprintf("%s: %v", at.Sub(s.start).Round(time.Second), err))
		}
		s.mu.Unlock()
		if err == nil {
			live = append(live, c)
		}
	}
}

// joinOnce joins through the edge with body and waits for the first snapshot showing
// the player.
func (s *soak) joinOnce(ctx context.Context, body string) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var j client.Ticket
	if err := postJoin(ctx, s.baseURL(), body, &j); err != nil {
		return nil, err
	}
	c, err := client.Dial(ctx, "ws"+s.baseURL()[len("http"):]+j.WS, client.Hello{Ticket: j.Ticket}, client.Options{})
	if err != nil {
		return nil, err
	}
	for {
		if _, ok := c.State().SelfEntity(); ok {
			return c, nil
		}
		select {
		case <-ctx.Done():
			c.Close()
			return nil, fmt.Errorf("no snapshot showing the player: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// dropSockets plays a guest on the default map whose socket breaks every 3 to 7 s,
// as a phone that changes networks: it dials again through the edge with its welcome's
// resume token and must be welcomed back as itself. A guest that cannot resume (within a
// fault's window) joins anew.
func (s *soak) dropSockets(ctx context.Context) {
	r := rand.New(rand.NewPCG(s.seed, 11))
	var c *client.Client
	var url string
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for ctx.Err() == nil {
		if c == nil {
			var err error
			if c, url, err = s.joinGuest(ctx); err != nil {
				c = nil
				time.Sleep(time.Second)
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(3*time.Second + time.Duration(r.Int64N(int64(4*time.Second)))):
		}
		w := c.Welcome()
		c.Drop()
		at := time.Now()
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := client.Dial(dctx, url, client.Hello{Resume: w.ResumeToken}, client.Options{})
		cancel()
		if err == nil && (!n.Welcome().Resumed || n.Welcome().CharacterID != w.CharacterID) {
			err = fmt.Errorf("welcomed as %+v, want %s resumed", n.Welcome(), w.CharacterID)
			n.Close()
		}
		s.mu.Lock()
		s.drops++
		if err == nil {
			s.resumed++
		} else if !s.inFaultWindow(at) && ctx.Err() == nil {
			s.refusals = append(s.refusals, fmt.Sprintf("%s: resume after a dropped socket: %v", at.Sub(s.start).Round(time.Second), err))
		}
		s.mu.Unlock()
		c = nil
		if err == nil {
			c = n
		}
	}
}

// joinGuest joins a guest through the edge and returns it with the URL it plays at.
func (s *soak) joinGuest(ctx context.Context) (*client.Client, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var j client.Ticket
	if err := postJoin(ctx, s.baseURL(), `{}`, &j); err != nil {
		return nil, "", err
	}
	url := "ws" + s.baseURL()[len("http"):] + j.WS
	c, err := client.Dial(ctx, url, client.Hello{Ticket: j.Ticket}, client.Options{})
	return c, url, err
}

// near reports whether two positions are within d units.
func near(x1, y1, x2, y2, d float64) bool { return math.Hypot(x1-x2, y1-y2) <= d }
