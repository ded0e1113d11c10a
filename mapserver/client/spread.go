package client

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/mapyard/mapyard/orchestrator/control"
)

// Spread places bots uniformly over a map before they connect, as returning players
// saved all over it would be, instead of at the map's spawn points. It speaks the
// control RPC in the map's place, so it needs the orchestrator's control URL and the
// map's own credential (the orchestrator lets a map act only for itself): it redeems a
// first join ticket of a keyed character for the map, pushes that character's state at
// a random position, and joins again; the map then spawns the character at its saved
// position. For benchmarks only.
type Spread struct {
	ControlURL string
	Secret     string
	// Width and Height bound the positions, in world units.
	Width, Height float64
}

// join returns a ticket for a keyed character saved at a random position of the map.
func (sp *Spread) join(ctx context.Context, hc *http.Client, joinURL string, r *rand.Rand) (Ticket, error) {
	body := map[string]string{"authKey": fmt.Sprintf("bot%016x%016x", r.Uint64(), r.Uint64())}
	var first Ticket
	if err := control.Call(ctx, hc, http.MethodPost, joinURL+control.PathJoin, "", body, &first); err != nil {
		return Ticket{}, err
	}
	var res control.RedeemResult
	if err := control.Call(ctx, hc, http.MethodPost, sp.ControlURL+control.PathRedeem, sp.Secret,
		control.RedeemRequest{InstanceID: first.InstanceID, Token: first.Ticket}, &res); err != nil {
		return Ticket{}, fmt.Errorf("redeem: %w", err)
	}
	payload, err := json.Marshal(control.CharacterStatePayload{
		MapID: first.MapID, InstanceID: first.InstanceID, X: r.Float64() * sp.Width, Y: r.Float64() * sp.Height,
	})
	if err != nil {
		return Ticket{}, err
	}
	now := time.Now()
	push := control.PersistSnapshot{
		InstanceID: first.InstanceID, Partition: control.CharacterPartitionPrefix + res.CharacterID,
		Revision: now.UnixMicro(), Epoch: res.Epoch,
		Envelope: control.NewSnapshotEnvelope("mapbots", 0, now.UnixMilli(), payload),
	}
	if err := control.Call(ctx, hc, http.MethodPost, sp.ControlURL+control.PathPersistSnapshot, sp.Secret, push, nil); err != nil {
		return Ticket{}, fmt.Errorf("place: %w", err)
	}
	var t Ticket
	if err := control.Call(ctx, hc, http.MethodPost, joinURL+control.PathJoin, "", body, &t); err != nil {
		return Ticket{}, err
	}
	return t, nil
}
