package client

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// Spread places bots uniformly over a map before they connect, as returning players
// saved all over it would be, instead of at the map's spawn points. It speaks the
// control RPC in the map's place, so it needs the orchestrator's control URL and the
// map's own credential (the orchestrator lets a map act only for itself): it redeems a
// first join ticket of a keyed character for the map, pushes that character's state at
// a random position, and joins again; the map then spawns the character at its saved
// position. With a Radius it gathers them instead: uniformly in the disc of that radius
// around (CX, CY), as players crowd at a spawn point or a portal (workload W3). With
// IntoMap and IntoInstance it saves them on that instance instead of the one the first
// join named (the default map), so the second join sends them there as returning
// players: a benchmark map created through the admin API is reached this way through
// the edge (workload W1 through the whole path). For benchmarks only.
type Spread struct {
	ControlURL string
	Secret     string
	// Width and Height bound the positions, in world units.
	Width, Height float64
	// Radius, when above zero, places every bot within Radius units of (CX, CY).
	CX, CY, Radius float64
	// IntoMap and IntoInstance, when set, are the map and instance every bot is saved
	// on; that instance must be ready when the bots join.
	IntoMap, IntoInstance string
}

// position draws a bot's position.
func (sp *Spread) position(r *rand.Rand) (x, y float64) {
	if sp.Radius > 0 {
		a, d := r.Float64()*2*math.Pi, sp.Radius*math.Sqrt(r.Float64())
		return sp.CX + d*math.Cos(a), sp.CY + d*math.Sin(a)
	}
	return r.Float64() * sp.Width, r.Float64() * sp.Height
}

// join returns a ticket for a keyed character saved at a random position of the map.
func (sp *Spread) join(ctx context.Context, hc *http.Client, joinURL string, r *rand.Rand) (Ticket, error) {
	body := map[string]string{"authKey": fmt.Sprintf("bot%016x%016x", r.Uint64(), r.Uint64())}
	var first Ticket
	if err := httpkit.Call(ctx, hc, http.MethodPost, joinURL+public.PathJoin, "", body, &first); err != nil {
		return Ticket{}, err
	}
	var res mapcontract.RedeemResult
	if err := httpkit.Call(ctx, hc, http.MethodPost, sp.ControlURL+mapcontract.PathRedeem, sp.Secret,
		mapcontract.RedeemRequest{InstanceID: first.InstanceID, Token: first.Ticket}, &res); err != nil {
		return Ticket{}, fmt.Errorf("redeem: %w", err)
	}
	x, y := sp.position(r)
	mapID, instanceID := first.MapID, first.InstanceID
	if sp.IntoInstance != "" {
		mapID, instanceID = sp.IntoMap, sp.IntoInstance
	}
	payload, err := json.Marshal(record.CharacterStatePayload{MapID: mapID, InstanceID: instanceID, X: x, Y: y})
	if err != nil {
		return Ticket{}, err
	}
	now := time.Now()
	push := mapcontract.PersistSnapshot{
		InstanceID: first.InstanceID, Partition: record.CharacterPartition(res.CharacterID),
		Revision: now.UnixMicro(), Epoch: res.Epoch,
		Envelope: record.NewSnapshotEnvelope("mapbots", 0, now.UnixMilli(), payload),
	}
	if err := httpkit.Call(ctx, hc, http.MethodPost, sp.ControlURL+mapcontract.PathPersistSnapshot, sp.Secret, push, nil); err != nil {
		return Ticket{}, fmt.Errorf("place: %w", err)
	}
	var t Ticket
	if err := httpkit.Call(ctx, hc, http.MethodPost, joinURL+public.PathJoin, "", body, &t); err != nil {
		return Ticket{}, err
	}
	if sp.IntoInstance != "" && t.InstanceID != sp.IntoInstance {
		return Ticket{}, fmt.Errorf("join sent the bot to %q, not to %q (is it ready?)", t.InstanceID, sp.IntoInstance)
	}
	return t, nil
}
