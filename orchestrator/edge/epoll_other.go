//go:build !linux

package edge

import (
	"errors"
	"net"
	"sync"
	"time"
)

// epollEngine is the epoll engine, which exists on Linux only; elsewhere the proxy
// copies with goroutines.
type epollEngine struct{}

type pollPair struct{}

// tlsSide is a player's TLS session in the epoll engine (Linux only).
type tlsSide struct{}

func newEpollEngine(time.Duration, time.Duration, time.Duration, *sync.Pool) (*epollEngine, error) {
	return nil, errors.New("the epoll engine needs Linux")
}

func (*epollEngine) adopt(*splice) error { return errors.New("the epoll engine needs Linux") }
func (*epollEngine) close(*pollPair)     {}
func (*epollEngine) stop()               {}
func (*epollEngine) paused() int64       { return 0 }

func (*epollEngine) addLink(*linkConn) bool      { return false }
func (*epollEngine) openStream(*linkStream) bool { return false }
func (*epollEngine) closeStream(*linkStream)     {}
func (*epollEngine) adoptStream(*linkStream, *splice, []byte) error {
	return errors.New("the epoll engine needs Linux")
}

func dupConn(net.Conn) (int, error) { return -1, errors.New("the epoll engine needs Linux") }
