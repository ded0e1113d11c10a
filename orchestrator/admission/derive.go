package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mapyard/mapyard/mapserver/mapgen"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/apierr"
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
// only open the maps its own world leads to. Error code: EMAPUNAVAILABLE.
func (s *Service) deriveConfig(ctx context.Context, fromInstanceID, mapID string) (json.RawMessage, error) {
	parent, err := s.instanceConfig(ctx, fromInstanceID)
	if err != nil {
		return nil, apierr.Errorf(apierr.EMAPUNAVAILABLE, "map %q: config of its parent %q: %v", mapID, fromInstanceID, err)
	}
	w, err := mapgen.Generate(parent)
	if err != nil {
		return nil, apierr.Errorf(apierr.EMAPUNAVAILABLE, "map %q: generate its parent %q: %v", mapID, fromInstanceID, err)
	}
	for _, p := range w.Portals {
		if p.TargetMapID != mapID || p.TargetSeed == 0 {
			continue
		}
		c, err := mapgen.Derive(parent, p.TargetSeed)
		if err != nil {
			return nil, apierr.Errorf(apierr.EMAPUNAVAILABLE, "derive map %q: %v", mapID, err)
		}
		b, err := json.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("derive map %q: encode: %w", mapID, err)
		}
		return b, nil
	}
	return nil, apierr.Errorf(apierr.EMAPUNAVAILABLE, "map %q has no portal to %q", parent.MapID, mapID)
}

// instanceConfig returns the MapConfig an instance runs: the config it was created with,
// or its map's template.
func (s *Service) instanceConfig(ctx context.Context, instanceID string) (mapgen.MapConfig, error) {
	inst, err := s.Maps.Gate(instanceID) // the source asks for the transfer, so it is ready
	if err != nil {
		return mapgen.MapConfig{}, err
	}
	var raw json.RawMessage
	if s.Wanted != nil {
		wanted, err := s.Wanted.ListInstances(ctx)
		if err != nil {
			return mapgen.MapConfig{}, err
		}
		for _, w := range wanted {
			if w.ID == instanceID {
				raw = w.Config
			}
		}
	}
	if t := bytes.TrimSpace(raw); string(t) == "{}" {
		raw = nil // stored as an empty object when created without a config
	}
	return mapgen.Resolve(instanceID, inst.MapID, raw)
}
