//go:build linux

package edge

import (
	"fmt"
	"testing"
	"time"
)

// TestLoop_PaceBusyLinks: in both ways the loop waits (its own thread, Go's poller), a
// pass that handled two or more events of players on links
// is followed by the rest of the batch time before the next; a pass with one such
// event, a pass long enough already, or no batch time at all is not.
func TestLoop_PaceBusyLinks(t *testing.T) {
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
				l := &loop{batch: c.batch, linkEvents: c.linkEvents, blocking: blocking}
				start := time.Now()
				l.passAt = start.Add(-c.ago).UnixNano()
				got := l.pace()
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
