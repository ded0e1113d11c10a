package main

import (
	"context"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/kernel/latency"
)

// Phase is the report of one phase of -moves (a live upgrade, a restart): how the
// bots went to the map's next container. A bot is counted once per phase by its worst
// break; pauses and rollbacks are over every break that came back.
type Phase struct {
	Name        string  `json:"name"`
	DurationSec float64 `json:"durationSec"`
	Bots        int     `json:"bots"`
	// Untouched bots saw no break; Moved bots came back on the same socket (a moving
	// event and a new welcome on it); SocketsClosed bots had their socket end (closed
	// by the server side, or left for a transfer's new one), of which Transferred
	// followed a transfer message, Resumed resumed, Rejoined joined anew (a new
	// character) and Lost had not come back when the phase ended.
	Untouched     int `json:"untouched"`
	Moved         int `json:"moved"`
	SocketsClosed int `json:"socketsClosed"`
	Transferred   int `json:"transferred"`
	Resumed       int `json:"resumed"`
	Rejoined      int `json:"rejoined"`
	Lost          int `json:"lost"`
	// Pauses run from the last snapshot before a break to the first after the next
	// welcome.
	PauseP50Ms float64 `json:"pauseP50Ms"`
	PauseP99Ms float64 `json:"pauseP99Ms"`
	PauseMaxMs float64 `json:"pauseMaxMs"`
	// Rollbacks are the distance, in world units, between the bot's position in those
	// two snapshots (raw), and that less StepUnits, the distance its own input moves it
	// in one tick (a snapshot may precede the cut by a tick); RolledBack counts the
	// breaks whose tick-adjusted distance is above one quantum. Rejoins are new
	// characters and not compared; Compared counts the breaks that were.
	StepUnits       float64 `json:"stepUnits"`
	Compared        int     `json:"compared"`
	RollbackMaxRaw  float64 `json:"rollbackMaxRaw"`
	RollbackP99Raw  float64 `json:"rollbackP99Raw"`
	RollbackMaxTick float64 `json:"rollbackMaxTickAdjusted"`
	RolledBack      int     `json:"rolledBack"`
	// JoinLoop is the newcomers of -join-loop during the phase.
	JoinLoop *JoinLoop `json:"joinLoop,omitempty"`
}

// phases runs -moves: each phase ends on SIGUSR1 (sent by the script once what it
// measures is over), the last one ends the window; ctx's end or the window's cut it
// short. It returns the phases' reports.
func phases(ctx context.Context, names []string, window time.Duration, usr1 <-chan os.Signal, s *client.Swarm,
	joins *joinLoop, speed float64) []Phase {
	end := time.NewTimer(window)
	defer end.Stop()
	var out []Phase
	var before JoinLoop
	if joins != nil {
		before = joins.current()
	}
	start := time.Now()
	for i, name := range names {
		over := false
		select {
		case <-usr1:
		case <-end.C:
			over = true
		case <-ctx.Done():
			over = true
		}
		now := time.Now()
		p := phase(name, s.Bots(), start, now, speed)
		if joins != nil {
			after := joins.current()
			d := JoinLoop{Joins: after.Joins - before.Joins, Refused: after.Refused - before.Refused, Failed: after.Failed - before.Failed}
			if after.FirstError != before.FirstError {
				d.FirstError = after.FirstError
			}
			p.JoinLoop, before = &d, after
		}
		out = append(out, p)
		start = now
		if over {
			for _, n := range names[i+1:] {
				out = append(out, Phase{Name: n})
			}
			break
		}
	}
	return out
}

// phase sums the bots' breaks that began in [from, to).
func phase(name string, bots []*client.Client, from, to time.Time, speed float64) Phase {
	p := Phase{Name: name, DurationSec: to.Sub(from).Seconds(), Bots: len(bots)}
	var pauses latency.Recorder
	var raws []float64
	for _, c := range bots {
		var mine []client.Move
		for _, m := range c.Stats().Moves {
			if !m.Began.Before(from) && m.Began.Before(to) {
				mine = append(mine, m)
			}
		}
		if m, ok := c.PendingMove(); ok && !m.Began.Before(from) && m.Began.Before(to) {
			mine = append(mine, m)
		}
		if len(mine) == 0 {
			p.Untouched++
			continue
		}
		if hz := c.Welcome().TickHz; hz > 0 && speed > 0 {
			p.StepUnits = speed / float64(hz)
		}
		worst := client.MoveMoving
		closed, lost := false, false
		for _, m := range mine {
			if worse(m.Cause, worst) {
				worst = m.Cause
			}
			closed = closed || m.SocketClosed
			lost = lost || !m.Back
			if !m.Back {
				continue
			}
			pauses.Add(m.Pause)
			if m.HavePos && m.Cause != client.MoveRejoin {
				raw := math.Hypot(m.ToX-m.FromX, m.ToY-m.FromY)
				raws = append(raws, raw)
				p.Compared++
				p.RollbackMaxRaw = max(p.RollbackMaxRaw, raw)
				adj := max(0, raw-p.StepUnits)
				p.RollbackMaxTick = max(p.RollbackMaxTick, adj)
				if adj > 1/client.QuantaPerUnit {
					p.RolledBack++
				}
			}
		}
		if closed {
			p.SocketsClosed++
		}
		switch {
		case lost:
			p.Lost++
		case worst == client.MoveRejoin:
			p.Rejoined++
		case worst == client.MoveResume:
			p.Resumed++
		case worst == client.MoveTransfer:
			p.Transferred++
		case !closed:
			p.Moved++
		}
	}
	p.PauseP50Ms, p.PauseP99Ms, p.PauseMaxMs = latency.Ms(pauses.Quantile(0.5)), latency.Ms(pauses.Quantile(0.99)), latency.Ms(pauses.Quantile(1))
	p.RollbackP99Raw = quantileOf(raws, 0.99)
	return p
}

// worse says whether cause a is a worse way across than b.
func worse(a, b string) bool {
	rank := map[string]int{client.MoveMoving: 1, client.MoveTransfer: 2, client.MoveResume: 3, client.MoveRejoin: 4}
	return rank[a] > rank[b]
}

// quantileOf is the nearest-rank q-quantile of xs (0 for none).
func quantileOf(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// phaseNames splits -moves' comma-separated list.
func phaseNames(list string) []string {
	var out []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}
