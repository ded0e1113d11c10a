package edge

import (
	"context"
	"sync"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/routetable"
)

// RouteSource is where the edge learns the route table: the orchestrator's control
// client in production, a fake in tests.
type RouteSource interface {
	WatchRoutes(ctx context.Context, after string, wait time.Duration) (routetable.RouteTable, error)
}

var _ RouteSource = (*routetable.Client)(nil)

// Routes is the edge's copy of the route table. It is replaced whole on every answer of
// the orchestrator's watch and kept as it is while the orchestrator is away, so that
// players reach running maps however long the orchestrator is gone.
type Routes struct {
	mu      sync.RWMutex
	byID    map[string]routetable.Route
	version string
	ready   bool
	online  bool
	static  bool
	fetched time.Time
}

// NewStaticRoutes returns a fixed table of ready instances on loopback ports: for
// benchmarks of the proxy against a server that is not a mapyard map.
func NewStaticRoutes(ports map[string]int) *Routes {
	r := &Routes{byID: map[string]routetable.Route{}, static: true, ready: true, online: true}
	for id, port := range ports {
		r.byID[id] = routetable.Route{InstanceID: id, State: "ready", GamePort: port}
	}
	return r
}

// Lookup returns the route of an instance.
func (r *Routes) Lookup(id string) (routetable.Route, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	rt, ok := r.byID[id]
	return rt, ok
}

// Status says whether the last watch reached the orchestrator, and whether its default
// map took players then.
func (r *Routes) Status() (online, ready bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.online, r.ready
}

// Len is the number of instances in the table.
func (r *Routes) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.byID)
}

func (r *Routes) set(t routetable.RouteTable, at time.Time) {
	byID := make(map[string]routetable.Route, len(t.Routes))
	for _, rt := range t.Routes {
		byID[rt.InstanceID] = rt
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byID, r.version, r.ready, r.online, r.fetched = byID, t.Version, t.Ready, true, at
}

// table returns the table as the orchestrator last answered it (in no set order).
func (r *Routes) table() routetable.RouteTable {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t := routetable.RouteTable{Version: r.version, Ready: r.ready, Routes: make([]routetable.Route, 0, len(r.byID))}
	for _, rt := range r.byID {
		t.Routes = append(t.Routes, rt)
	}
	return t
}

func (r *Routes) setOffline() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.online = false
}

func (r *Routes) versionAndTime() (string, time.Time) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.version, r.fetched
}

func (r *Routes) isStatic() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.static
}
