package supervise

import (
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
)

// ControlTarget returns the base URL of the control listener of the container that runs
// instanceID now and the credential the orchestrator presents there. The orchestrator's
// proxy of map metrics uses it, so that Prometheus never holds a map's credential.
// Error codes: ENOTFOUND (no such instance), EMAPUNAVAILABLE (no container runs it now).
func (s *Supervisor) ControlTarget(instanceID string) (url, credential string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[instanceID]
	if !ok {
		return "", "", apierr.Errorf(apierr.ENOTFOUND, "no map instance %q", instanceID)
	}
	if in.ControlPort == 0 {
		return "", "", apierr.Errorf(apierr.EMAPUNAVAILABLE, "map instance %q has no running container (%s)", instanceID, in.State)
	}
	return in.ports.ControlURL(), s.orchCredential(in.ident), nil
}
