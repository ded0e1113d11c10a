//go:build !linux

package edge

import (
	"errors"
	"sync"
	"time"
)

// loop is the event-loop engine, which exists on Linux only; elsewhere the proxy
// copies with goroutines.
type loop struct{}

type loopPair struct{}

func newLoop(time.Duration, time.Duration, *sync.Pool) (*loop, error) {
	return nil, errors.New("the loop engine needs Linux")
}

func (*loop) adopt(*splice) error { return errors.New("the loop engine needs Linux") }
func (*loop) close(*loopPair)     {}
func (*loop) stop()               {}
func (*loop) paused() int64       { return 0 }
