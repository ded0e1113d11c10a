package orchlink_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/orchlink"
	"github.com/mapyard/mapyard/orchestrator/control"
)

// fakeOrch is a hand-written counting fake of the orchestrator's control RPC.
type fakeOrch struct {
	mu            sync.Mutex
	readyFailures int // MapReady fails this many times first
	readyCalls    int
	beats         int
	forgetAt      int // the forgetAt-th heartbeat answers "not registered"
	done          chan struct{}
	doneAfter     int // close done after this many MapReady successes
	successes     int
}

func (f *fakeOrch) MapReady(ctx context.Context, r control.MapReady) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readyCalls++
	if f.readyFailures > 0 {
		f.readyFailures--
		return errors.New("connection refused")
	}
	f.successes++
	if f.successes == f.doneAfter {
		close(f.done)
	}
	return nil
}

func (f *fakeOrch) Heartbeat(ctx context.Context, h control.Heartbeat) (control.HeartbeatAnswer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.beats++
	return control.HeartbeatAnswer{Registered: f.beats != f.forgetAt}, nil
}

func TestLink_Run(t *testing.T) {
	t.Run("RetriesUntilRegistered", func(t *testing.T) {
		f := &fakeOrch{readyFailures: 3, done: make(chan struct{}), doneAfter: 1}
		runUntil(t, f)
		if got, want := f.readyCalls, 4; got != want {
			t.Fatalf("MapReady calls=%d, want %d", got, want)
		}
	})
	t.Run("RegistersAgainWhenForgotten", func(t *testing.T) {
		f := &fakeOrch{forgetAt: 2, done: make(chan struct{}), doneAfter: 2}
		runUntil(t, f)
		if f.beats < 2 {
			t.Fatalf("heartbeats=%d, want at least 2 before registering again", f.beats)
		}
	})
}

func runUntil(t *testing.T, f *fakeOrch) {
	t.Helper()
	l := orchlink.New(f, control.MapReady{InstanceID: "a-1"}, time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	l.RetryMin, l.RetryMax = time.Millisecond, 2*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { l.Run(ctx); close(stopped) }()
	select {
	case <-f.done:
	case <-time.After(10 * time.Second):
		t.Fatal("link did not reach the expected registrations")
	}
	cancel()
	<-stopped // the link has stopped, so f may be read without the lock
}
