//go:build linux

package edge

import (
	"bytes"
	"fmt"
	"sync"
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

// TestEpoll_MapGoneBehindPending: a map that ends while the player's socket is full
// has its close frame (public.CloseMapGone) wait behind the bytes already waiting, or
// on its own, and the player's side is shut only once all of it is written.
func TestEpoll_MapGoneBehindPending(t *testing.T) {
	for _, tt := range []struct {
		name    string
		pending []byte // map bytes waiting for the player when the map ends
	}{
		{"Waiting", []byte{0x81, 3, 'e', 'n', 'd'}},
		{"Alone", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pair := func() [2]int {
				fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { syscall.Close(fds[0]); syscall.Close(fds[1]) })
				return [2]int{fds[0], fds[1]}
			}
			client, backend := pair(), pair() // [0] the engine's end, [1] the player's or the map's
			epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
			if err != nil {
				t.Fatal(err)
			}
			defer syscall.Close(epfd)
			ep := &epollEngine{epfd: epfd, bufs: &sync.Pool{New: func() any { b := make([]byte, BufferSize); return &b }},
				fds: map[int32]*pollPair{}, pairs: map[*pollPair]struct{}{}, scratch: make([]byte, BufferSize)}
			pp := &pollPair{s: &splice{}}
			pp.side[0].fd, pp.side[1].fd = client[0], backend[0]
			now := time.Now().UnixNano()
			ep.register(pp, now)

			// The player reads nothing yet: its socket fills.
			var sent []byte
			chunk := make([]byte, 4096)
			for {
				n, e := rawio.Write(client[0], chunk)
				if e != 0 {
					break
				}
				sent = append(sent, chunk[:n]...)
			}
			if len(tt.pending) > 0 {
				d := &pp.dir[1]
				d.pbuf = ep.bufs.Get().(*[]byte)
				d.pending, d.since = append((*d.pbuf)[:0], tt.pending...), now
			}
			if !ep.mapEndedPair(pp, true, now) {
				t.Fatal("the pair is closed at once")
			}
			if !pp.side[1].off {
				t.Fatal("the map's socket is still watched")
			}
			want := append(append(sent, tt.pending...), mapGoneClose...)
			var got []byte
			buf := make([]byte, 64<<10)
			for deadline := time.Now().Add(5 * time.Second); ; {
				n, e := rawio.Read(client[1], buf)
				switch {
				case e == syscall.EAGAIN && len(pp.dir[1].pending) > 0:
					if !ep.flush(pp, 1, now) {
						t.Fatal("flush failed")
					}
					continue
				case e == syscall.EAGAIN:
					t.Fatalf("the player's side is not shut after %d of %d bytes", len(got), len(want))
				case e != 0:
					t.Fatal(e)
				case n == 0:
					if !bytes.Equal(got, want) {
						t.Fatalf("the player read %d bytes ending % x, want %d ending % x", len(got), got[max(0, len(got)-20):], len(want), want[len(want)-20:])
					}
					return
				}
				got = append(got, buf[:n]...)
				if time.Now().After(deadline) {
					t.Fatal("timed out")
				}
			}
		})
	}
}
