//go:build !linux

package edge

import (
	"errors"
	"net"
	"sync"
	"time"
)

// loop is the event-loop engine, which exists on Linux only; elsewhere the proxy
// copies with goroutines.
type loop struct{}

type loopPair struct{}

func newLoop(time.Duration, time.Duration, time.Duration, *sync.Pool) (*loop, error) {
	return nil, errors.New("the loop engine needs Linux")
}

func (*loop) adopt(*splice) error { return errors.New("the loop engine needs Linux") }
func (*loop) close(*loopPair)     {}
func (*loop) stop()               {}
func (*loop) paused() int64       { return 0 }

func (*loop) addLink(*linkConn) bool      { return false }
func (*loop) openStream(*linkStream) bool { return false }
func (*loop) closeStream(*linkStream)     {}
func (*loop) adoptStream(*linkStream, *splice, []byte) error {
	return errors.New("the loop engine needs Linux")
}

func dupConn(net.Conn) (int, error) { return -1, errors.New("the loop engine needs Linux") }
