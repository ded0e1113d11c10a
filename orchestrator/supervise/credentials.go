package supervise

import (
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/orchestrator/keys"
)

// Credentials mints the two credentials of a map container: the one it presents to the
// orchestrator and the one the orchestrator presents to it. Both are recomputed from the
// container's identity (the instance id it was created for and its generation, kept as
// labels), so nothing secret is stored and a restarted orchestrator can still verify
// and reach the containers it adopts. *keys.Root implements it.
type Credentials interface {
	MapCredential(id keys.Identity) (string, error)
	OrchCredential(id keys.Identity) (string, error)
	// KeyID fingerprints the root the credentials come from; containers are labelled
	// with it, and adoption replaces those of another root.
	KeyID() string
}

var _ Credentials = (*keys.Root)(nil)

// mint returns a new identity for a container created for id, with the environment
// that hands it its credentials.
func (s *Supervisor) mint(id string) (keys.Identity, []string, error) {
	ident := keys.Identity{InstanceID: id, Generation: keys.NewGeneration()}
	mc, err := s.Credentials.MapCredential(ident)
	if err != nil {
		return ident, nil, err
	}
	oc, err := s.Credentials.OrchCredential(ident)
	if err != nil {
		return ident, nil, err
	}
	return ident, []string{mapcontract.EnvCredential + "=" + mc, mapcontract.EnvOrchCredential + "=" + oc}, nil
}

// orchCredential is what the supervisor presents to the container of ident. An
// identity that cannot have one (never minted here) gets none, and the map refuses.
func (s *Supervisor) orchCredential(ident keys.Identity) string {
	c, _ := s.Credentials.OrchCredential(ident)
	return c
}

// current reports whether c holds credentials of this orchestrator's root: a container
// of an earlier version (no generation) or of a rotated root cannot be reached or
// verified, so it is replaced rather than adopted.
func (s *Supervisor) current(c Container) bool {
	return keys.ValidGeneration(c.Identity.Generation) && c.KeyID == s.Credentials.KeyID()
}

// Adopted reports whether Open has adopted the running containers: until then a
// container's credential cannot be told current or not.
func (s *Supervisor) Adopted() bool { return s.adopted.Load() }

// InstanceOf returns the instance the container of id runs now, for the control
// listener to check what a map may act for: the instance itself, the instance a pool
// container was handed, or the pool id of a blank one. A replaced or unknown container
// gets ok=false.
func (s *Supervisor) InstanceOf(id keys.Identity) (instanceID string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in, found := s.instances[id.InstanceID]; found && in.ident == id {
		return in.ID, true
	} else if found && in.upgrade.active() && (in.upgrade.next.ident == id || in.upgrade.prev.ident == id) {
		// Both containers of a live upgrade speak for the instance: the next one
		// registers, the previous one hands its players over.
		return in.ID, true
	}
	if m, found := s.pool[id.InstanceID]; found && m.ident == id {
		return m.id, true
	}
	for _, in := range s.instances {
		if in.ident == id {
			return in.ID, true
		}
	}
	return "", false
}
