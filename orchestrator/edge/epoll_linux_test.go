//go:build linux

package edge

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/edgelink"
	"github.com/mapyard/mapyard/mapserver/kernel/rawio"
)

// TestEpoll_PaceBusyLinks: in both ways the engine waits (its own thread, Go's poller), a
// pass that handled two or more events of players on links
// is followed by the rest of the batch time before the next; a pass with one such
// event, a pass long enough already, or no batch time at all is not.
func TestEpoll_PaceBusyLinks(t *testing.T) {
	const batch = 30 * time.Millisecond
	cases := []struct {
		name       string
		batch      time.Duration
		linkEvents int
		ago        time.Duration // since the pass began
		want       bool
	}{
		{"busy", batch, 2, 0, true},
		{"busier", batch, 200, 0, true},
		{"one player's message", batch, 1, 0, false},
		{"no link traffic", batch, 0, 0, false},
		{"pass already long enough", batch, 50, batch, false},
		{"batching off", 0, 50, 0, false},
	}
	for _, c := range cases {
		for _, blocking := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/blocking=%v", c.name, blocking), func(t *testing.T) {
				ep := &epollEngine{batch: c.batch, linkEvents: c.linkEvents, blocking: blocking}
				start := time.Now()
				ep.passAt = start.Add(-c.ago).UnixNano()
				got := ep.pace()
				waited := time.Since(start)
				if got != c.want {
					t.Fatalf("pace() = %v, want %v", got, c.want)
				}
				if got && waited < batch-time.Millisecond {
					t.Fatalf("pace() waited %v, want the rest of the batch time, %v", waited, batch)
				}
			})
		}
	}
}

// TestEpoll_LinkReadWhole: a pass reads a link until the map's socket is empty, not one
// buffer of it, so that a crowd's snapshot round (hundreds of kilobytes) is not spread
// over several passes paced a millisecond apart.
func TestEpoll_LinkReadWhole(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	// Records of a stream the edge no longer has: read and dropped.
	payload := make([]byte, 1000)
	var records []byte
	for len(records) < 2*linkReadSize+linkReadSize/2 { // three reads
		records = edgelink.AppendHeader(records, edgelink.KindData, 99, len(payload))
		records = append(records, payload...)
	}
	for sent := 0; sent < len(records); {
		n, err := syscall.Write(fds[1], records[sent:])
		if err != nil {
			t.Fatalf("writing the records: %v after %d bytes", err, sent)
		}
		sent += n
	}
	ep := &epollEngine{}
	lk := &linkConn{fd: fds[0], rbuf: make([]byte, 0, linkReadSize), streams: map[uint32]*linkStream{}}
	ep.pumpLink(lk, syscall.EPOLLIN, time.Now().UnixNano())
	if lk.dead {
		t.Fatal("the link ended")
	}
	if n, e := rawio.Read(fds[0], make([]byte, 1)); e != syscall.EAGAIN {
		t.Fatalf("after one pass the socket still held bytes (read %d, %v)", n, e)
	}
	if ep.more {
		t.Fatal("the engine was told to poll again with nothing left to read")
	}
	if len(lk.rbuf) != 0 {
		t.Fatalf("%d bytes of a partial record kept, want none", len(lk.rbuf))
	}
}
