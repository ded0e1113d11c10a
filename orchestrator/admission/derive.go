package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/orchestrator"
)

// derivedPrefix starts the id of every map discovered through a portal (mapgen.DerivedMapID).
const derivedPrefix = "wild-"

// WantedInstances lists the wanted instances with the configs they run; admission reads
// it to find the config of a derived map's parent. The SQLite store implements it.
type WantedInstances interface {
	ListInstances(ctx context.Context) ([]orchestrator.WantedInstance, error)
}

// IsDerived reports whether mapID names a map discovered through a portal.
func IsDerived(mapID string) bool { return strings.HasPrefix(mapID, derivedPrefix) }

// deriveConfig builds the MapConfig of the derived map mapID reached from instance
// fromInstanceID: the parent's config (the instance's stored config, else its map's
// template) and the seed of the parent world's portal that leads to mapID, through
// mapgen.Derive. The portal must exist in the parent's generated world, so a map can
// only open the maps its own world leads to. The derived map runs its parent's image
// (Derive keeps it): a world discovered from a game's map is a map of that game.
// Error code: EMAPUNAVAILABLE.
func (s *Service) deriveConfig(ctx context.Context, fromInstanceID, mapID string) (mapgen.MapConfig, error) {
	parent, err := s.instanceConfig(ctx, fromInstanceID)
	if err != nil {
		return mapgen.MapConfig{}, apierr.Errorf(apierr.EMAPUNAVAILABLE, "map %q: config of its parent %q: %v", mapID, fromInstanceID, err)
	}
	w, err := mapgen.Generate(parent)
	if err != nil {
		return mapgen.MapConfig{}, apierr.Errorf(apierr.EMAPUNAVAILABLE, "map %q: generate its parent %q: %v", mapID, fromInstanceID, err)
	}
	for _, p := range w.Portals {
		if p.TargetMapID != mapID || p.TargetSeed == 0 {
			continue
		}
		c, err := mapgen.Derive(parent, p.TargetSeed)
		if err != nil {
			return mapgen.MapConfig{}, apierr.Errorf(apierr.EMAPUNAVAILABLE, "derive map %q: %v", mapID, err)
		}
		return c, nil
	}
	return mapgen.MapConfig{}, apierr.Errorf(apierr.EMAPUNAVAILABLE, "map %q has no portal to %q", parent.MapID, mapID)
}

// instanceConfig returns the MapConfig an instance runs: the config it was created with,
// or its map's template, with the image its record names (a stored config carries
// none: the orchestrator keeps the image beside it).
func (s *Service) instanceConfig(ctx context.Context, instanceID string) (mapgen.MapConfig, error) {
	inst, err := s.Maps.Gate(instanceID) // the source asks for the transfer, so it is ready
	if err != nil {
		return mapgen.MapConfig{}, err
	}
	var raw json.RawMessage
	var image *string
	if s.Wanted != nil {
		wanted, err := s.Wanted.ListInstances(ctx)
		if err != nil {
			return mapgen.MapConfig{}, err
		}
		for _, w := range wanted {
			if w.ID == instanceID {
				raw, image = w.Config, &w.Image
			}
		}
	}
	if t := bytes.TrimSpace(raw); string(t) == "{}" {
		raw = nil // stored as an empty object when created without a config
	}
	c, err := s.Templates.Resolve(instanceID, inst.MapID, raw)
	if err == nil && image != nil {
		c.Image = *image
	}
	return c, err
}

// splitImage returns c's JSON without its image, and the image: the orchestrator keeps
// a map's image in its own record and hands maps their config without it, so a map
// built before MapConfig had the field still reads it.
func splitImage(c mapgen.MapConfig) (json.RawMessage, string, error) {
	image := c.Image
	c.Image = ""
	b, err := json.Marshal(c)
	if err != nil {
		return nil, "", fmt.Errorf("encode map config of %q: %w", c.InstanceID, err)
	}
	return b, image, nil
}
