package main

import (
	"context"
	"fmt"
	"time"

	"github.com/mapyard/mapyard/mapserver/client"
)

// prober is workload W3's probe: one more player, joined before the bots, that stands
// still, acknowledges every snapshot and pings at its own interval, so its round trips
// and snapshot rate show what one player lives through beside the crowd.
type prober struct {
	swarm *client.Swarm
	c     *client.Client
	done  chan struct{}
}

// startProbe joins the probe as the bots join (through joinURL, or straight to mapURL)
// and pings every interval until ctx ends.
func startProbe(ctx context.Context, joinURL, mapURL string, every time.Duration) (*prober, error) {
	s := &client.Swarm{JoinURL: joinURL, MapURL: mapURL, N: 1, Idle: true}
	if err := s.Connect(ctx); err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	p := &prober{swarm: s, c: s.Bots()[0], done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-p.c.Done():
				return
			case <-t.C:
				_ = p.c.Ping()
			}
		}
	}()
	return p, nil
}

// position waits for the probe's first snapshot and returns where it stands, in world
// units: the spawn point the bots gather around.
func (p *prober) position(ctx context.Context) (x, y float64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if e, ok := p.c.State().SelfEntity(); ok {
			x, y = client.Position(e)
			return x, y, nil
		}
		select {
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("probe: no snapshot showing itself: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// close stops the probe (its pinger ends with the context given to startProbe).
func (p *prober) close() {
	p.swarm.Close()
	<-p.done
}
