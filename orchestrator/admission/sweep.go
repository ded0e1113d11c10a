package admission

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultSweepInterval is how often the sweeper started by Open runs Sweep.
const DefaultSweepInterval = time.Second

// errClosed is the cause the sweeper's context is cancelled with by Close.
var errClosed = errors.New("admission service closed")

// Open starts the service's background work: a sweeper that runs Sweep every
// SweepInterval, with TransferTTL as the grace a destination gets to report after its
// token expired, so no transfer stays pending forever in any binary that admits players
// (the orchestrator and the fake orchestrator alike). Close stops it.
func (s *Service) Open() error {
	if s.SweepInterval <= 0 {
		return fmt.Errorf("admission: SweepInterval must be positive, got %s", s.SweepInterval)
	}
	if s.cancel != nil {
		return errors.New("admission: already open")
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	s.cancel, s.swept = cancel, make(chan struct{})
	go func() {
		defer close(s.swept)
		s.sweepLoop(ctx)
	}()
	return nil
}

// Close stops the sweeper and waits for a sweep in progress to end.
func (s *Service) Close() error {
	if s.cancel == nil {
		return nil
	}
	s.cancel(errClosed)
	<-s.swept
	return nil
}

// sweepLoop runs Sweep on a ticker until ctx ends. A failed sweep is logged and retried
// on the next tick: the transfers it did not reach are still pending then.
func (s *Service) sweepLoop(ctx context.Context) {
	t := time.NewTicker(s.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := s.Sweep(ctx, s.TransferTTL); err != nil && ctx.Err() == nil {
			s.Log.Error("sweep transfers", "err", err)
		}
	}
}
