package conform

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// checkUser reads the image's USER. The orchestrator runs every map as 10001:10001
// whatever the image says, so an image built for root breaks there, and one started by
// hand (`docker run`) runs as root: the image must say a non-root user itself.
func (r *runner) checkUser(ctx context.Context) error {
	user := ""
	if r.image.Config != nil {
		user = r.image.Config.User
	}
	name, _, _ := strings.Cut(user, ":")
	switch name {
	case "":
		return fmt.Errorf("the image has no USER: it runs as root; add USER 10001:10001")
	case "0", "root":
		return fmt.Errorf("the image's USER is %q (root); use USER 10001:10001", user)
	}
	return nil
}

// checkReadOnly inspects the default map's container: the map registered and keeps
// running in the container the orchestrator makes, locked down as the contract says.
func (r *runner) checkReadOnly(ctx context.Context) error {
	inst, err := r.life.sup.Instance(r.a)
	if err != nil {
		return err
	}
	info, err := r.cli.ContainerInspect(ctx, inst.ContainerID)
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	h, c := info.HostConfig, info.Config
	switch {
	case h == nil || c == nil || info.State == nil:
		return fmt.Errorf("container %s inspected without its configuration", inst.ContainerID)
	case !h.ReadonlyRootfs || c.User != "10001:10001" || !slices.Contains(h.CapDrop, "ALL") || !slices.Contains(h.SecurityOpt, "no-new-privileges:true"):
		return fmt.Errorf("the container is not locked down as the orchestrator makes it (read-only %v, user %q, cap-drop %v, %v)",
			h.ReadonlyRootfs, c.User, h.CapDrop, h.SecurityOpt)
	case !info.State.Running || info.RestartCount != 0 || inst.Restarts != 0:
		return fmt.Errorf("the map did not keep running (running %v, restarts %d)", info.State.Running, inst.Restarts)
	}
	return nil
}
