package main

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/latency"
)

// JoinLoop is the report of -join-loop: players joining through the edge at a steady
// rate during the window, each a join, a hello with its ticket and a close, as a
// newcomer's page does. Refused counts the attempts whose connection the edge's port
// refused or cut before any answer; Failed those that got an answer other than a
// welcome (an error status, a refused hello).
type JoinLoop struct {
	Joins      int64   `json:"joins"`
	Refused    int64   `json:"refused"`
	Failed     int64   `json:"failed"`
	FirstError string  `json:"firstError,omitempty"`
	P50Ms      float64 `json:"p50Ms"`
	MaxMs      float64 `json:"maxMs"`
}

// joinLoop joins a player every 1/rate s through the edge at joinURL until ctx ends,
// each on a goroutine of its own, and reports how they went.
type joinLoop struct {
	mu    sync.Mutex
	r     JoinLoop
	times latency.Recorder
	wg    sync.WaitGroup
}

func startJoinLoop(ctx context.Context, joinURL string, rate int) *joinLoop {
	l := &joinLoop{}
	// New connections for every join, as newcomers make them: a kept-alive one would
	// hide a refused connect.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(time.Second / time.Duration(rate))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				l.record(l.join(ctx, hc, joinURL))
			}()
		}
	}()
	return l
}

// join is one newcomer: a join, a hello, a close.
func (l *joinLoop) join(ctx context.Context, hc *http.Client, joinURL string) (time.Duration, error) {
	start := time.Now()
	t, err := client.Join(ctx, hc, joinURL)
	if err != nil {
		return 0, err
	}
	c, err := client.Dial(ctx, "ws"+joinURL[len("http"):]+t.WS, client.Hello{Ticket: t.Ticket}, client.Options{})
	if err != nil {
		return 0, err
	}
	took := time.Since(start)
	c.Close()
	return took, nil
}

func (l *joinLoop) record(took time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.r.Joins++
		l.times.Add(took)
		return
	case errors.Is(err, context.Canceled):
		return // the window ended
	case refusedConnect(err):
		l.r.Refused++
	default:
		l.r.Failed++
	}
	if l.r.FirstError == "" {
		l.r.FirstError = err.Error()
	}
}

// refusedConnect says whether err is the edge's port refusing or cutting a
// connection, rather than an answer: anything but an error envelope, a refused hello
// or a refused upgrade.
func refusedConnect(err error) bool {
	var api *apierr.Error
	var hello *client.ServerError
	return !errors.As(err, &api) && !errors.As(err, &hello) && !errors.Is(err, websocket.ErrBadHandshake)
}

// current returns the counts so far, the joins under way aside.
func (l *joinLoop) current() JoinLoop {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r
}

// stop waits for the joins under way and returns the report.
func (l *joinLoop) stop() JoinLoop {
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.r
	r.P50Ms, r.MaxMs = latency.Ms(l.times.Quantile(0.5)), latency.Ms(l.times.Quantile(1))
	return r
}
