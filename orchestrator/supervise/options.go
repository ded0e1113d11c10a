package supervise

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// Defaults of Options, matching the ORCH_* defaults of DESIGN.md.
const (
	DefaultInstanceID       = "default-1"
	DefaultMapID            = "default"
	DefaultRestartWindow    = 60 * time.Second
	DefaultRestartMax       = 3
	DefaultQuarantine       = 60 * time.Second
	DefaultHeartbeatTimeout = 15 * time.Second
	DefaultProbeInterval    = 2 * time.Second
	DefaultProbeFailures    = 2
	DefaultProbeGrace       = 3 * time.Second
	DefaultStartTimeout     = 30 * time.Second
	DefaultStopGrace        = 10 * time.Second
	DefaultOrphanGrace      = 10 * time.Second
	DefaultIdleStop         = 10 * time.Minute
	DefaultPoolSize         = 1
	DefaultRehome           = 30 * time.Second
	// DefaultImage is the kit's own map image: maps that name no image run it.
	DefaultImage = "mapyard/map:latest"
	// DefaultExampleImage is the example game's image, which `make images` builds
	// beside DefaultImage; allowed by default so its maps start on a fresh host.
	DefaultExampleImage = "mapyard/tag:latest"
)

// ResyncInterval is how often the supervisor compares the runtime's containers with
// its records even when the events stream seems fine, in case an event was lost.
const ResyncInterval = 30 * time.Second

// Options are the supervisor's policies. Start from DefaultOptions; the orchestrator's
// command maps its environment onto them.
type Options struct {
	DefaultInstanceID string // always wanted, never idle-stopped
	DefaultMapID      string
	// DefaultMapImage is the image the default instance is created with the first time
	// it is wanted (its template's); empty means Image.
	DefaultMapImage string
	// Templates are the map templates a map without a config of its own is started
	// from: the kit's, with the host's laid over them (nil: the kit's alone).
	Templates *mapgen.Templates

	// Image runs every map that names no image, and is always allowed.
	Image string
	// Images are the images maps may name besides Image (ORCH_MAP_IMAGES): a create or
	// a start naming any other is refused, so a template or an admin request cannot
	// make the host run an image its operator did not choose. References are compared
	// as written.
	Images []string

	Policy           RestartPolicy // restarts per window, and the quarantine past it
	HeartbeatTimeout time.Duration // a registered map without a heartbeat this long is unhealthy
	ProbeInterval    time.Duration // between HTTP probes of each ready map's /health
	ProbeFailures    int           // consecutive failed probes that make a map unhealthy
	// ProbeGrace is how long a map has been ready before its /health is probed: in the
	// first moments after a start the proxy of a published port may still reset
	// connections to a map that is up (it registered), which is not the map's failure.
	ProbeGrace   time.Duration
	StartTimeout time.Duration // starting → unhealthy; also bounds Acquire's wait
	StopGrace    time.Duration // SIGTERM → SIGKILL
	OrphanGrace  time.Duration // unknown containers found at start are removed after it
	IdleStop     time.Duration // non-default instances without players are stopped after it
	// PoolSize is how many blank containers are kept started and registered per
	// image: of Image always, and of any other image once a map of it has started (or
	// is wanted running), so that an allowed image nobody uses costs nothing.
	PoolSize int
	// Rehome is how long a map handed out from the warm pool must have had no players
	// before it is moved to a container created for its instance (0: never). A pool
	// container's labels and environment cannot name the instance it is handed later;
	// the new container's do.
	Rehome        time.Duration
	AllowFaultEnv bool // accept MAP_FAULT_* env in Create (tests only)

	// Env is the environment every map container gets (how to reach the
	// orchestrator, MAP_* tunables); the supervisor adds each container's identity and
	// its own credentials.
	Env []string
}

// DefaultOptions returns the options with every default.
func DefaultOptions() Options {
	return Options{
		DefaultInstanceID: DefaultInstanceID,
		DefaultMapID:      DefaultMapID,
		Image:             DefaultImage,
		Images:            []string{DefaultImage, DefaultExampleImage},
		Policy:            RestartPolicy{Window: DefaultRestartWindow, Max: DefaultRestartMax, Quarantine: DefaultQuarantine},
		HeartbeatTimeout:  DefaultHeartbeatTimeout,
		ProbeInterval:     DefaultProbeInterval,
		ProbeFailures:     DefaultProbeFailures,
		ProbeGrace:        DefaultProbeGrace,
		StartTimeout:      DefaultStartTimeout,
		StopGrace:         DefaultStopGrace,
		OrphanGrace:       DefaultOrphanGrace,
		IdleStop:          DefaultIdleStop,
		PoolSize:          DefaultPoolSize,
		Rehome:            DefaultRehome,
	}
}

// Validate checks values that would make the supervisor misbehave.
func (o Options) Validate() error {
	if !record.ValidName(o.DefaultInstanceID) {
		return fmt.Errorf("default instance id %q must be %s", o.DefaultInstanceID, record.IDRule)
	}
	if !record.ValidName(o.DefaultMapID) {
		return fmt.Errorf("default map id %q must be %s", o.DefaultMapID, record.IDRule)
	}
	if err := mapgen.ValidateImage("image", o.Image, false); err != nil {
		return err
	}
	for _, img := range append([]string{o.DefaultMapImage}, o.Images...) {
		if err := mapgen.ValidateImage("image", img, true); err != nil {
			return err
		}
	}
	if o.DefaultMapImage != "" && !o.allowed(o.DefaultMapImage) {
		return fmt.Errorf("the default map's image %q is not allowed (it is neither the default image %q nor one of %v)", o.DefaultMapImage, o.Image, o.Images)
	}
	if o.Policy.Window <= 0 || o.HeartbeatTimeout <= 0 || o.ProbeInterval <= 0 || o.StartTimeout <= 0 || o.IdleStop <= 0 {
		return errors.New("restart window, heartbeat timeout, probe interval, start timeout and idle stop must be positive")
	}
	if o.Policy.Max < 0 || o.Policy.Quarantine < 0 || o.StopGrace < 0 || o.OrphanGrace < 0 || o.PoolSize < 0 || o.Rehome < 0 || o.ProbeFailures < 1 || o.ProbeGrace < 0 {
		return errors.New("restart max, quarantine, stop grace, orphan grace, pool size and rehome must not be negative; probe failures at least 1")
	}
	return nil
}

// allowed reports whether maps may run image: Image, or one of Images.
func (o *Options) allowed(image string) bool {
	return image == o.Image || slices.Contains(o.Images, image)
}

// imageOf is the image a map that names image runs: image itself, or Image for none.
func (o *Options) imageOf(image string) string {
	if image == "" {
		return o.Image
	}
	return image
}
