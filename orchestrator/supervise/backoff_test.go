package supervise

import (
	"testing"
	"time"
)

// fakeClock is a settable clock for rules about windows.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time      { return c.t }
func (c *fakeClock) Add(d time.Duration) { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock           { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func TestRestartPolicy(t *testing.T) {
	p := RestartPolicy{Window: 60 * time.Second, Max: 3, Quarantine: 30 * time.Second}

	t.Run("QuarantinedAfterMaxInWindow", func(t *testing.T) {
		clk, l := newFakeClock(), &restartLog{}
		for i := 0; i < 3; i++ {
			if ok, _ := p.allow(l, clk.Now()); !ok {
				t.Fatalf("restart %d refused", i+1)
			}
			clk.Add(10 * time.Second)
		}
		ok, until := p.allow(l, clk.Now())
		if ok {
			t.Fatal("fourth restart within the window allowed")
		}
		if got, want := until, clk.Now().Add(30*time.Second); !got.Equal(want) {
			t.Fatalf("quarantine until %v, want %v", got, want)
		}
		if got := p.count(l, clk.Now()); got != 3 {
			t.Fatalf("count %d, want 3", got)
		}
	})
	t.Run("WindowSlides", func(t *testing.T) {
		clk, l := newFakeClock(), &restartLog{}
		for i := 0; i < 3; i++ {
			p.allow(l, clk.Now())
			clk.Add(20 * time.Second)
		}
		// now = start+60s: the first restart has left the window.
		if ok, _ := p.allow(l, clk.Now()); !ok {
			t.Fatal("restart refused although the oldest one left the window")
		}
		if ok, _ := p.allow(l, clk.Now()); ok {
			t.Fatal("restart allowed with 3 in the window")
		}
	})
	t.Run("ResetAfterQuarantine", func(t *testing.T) {
		clk, l := newFakeClock(), &restartLog{}
		for i := 0; i < 3; i++ {
			p.allow(l, clk.Now())
		}
		if ok, _ := p.allow(l, clk.Now()); ok {
			t.Fatal("allowed past max")
		}
		clk.Add(p.Quarantine)
		l.reset()
		if ok, _ := p.allow(l, clk.Now()); !ok {
			t.Fatal("refused after the quarantine reset the log")
		}
	})
	t.Run("ZeroMaxQuarantinesAtOnce", func(t *testing.T) {
		p := RestartPolicy{Window: time.Minute, Max: 0, Quarantine: time.Second}
		if ok, _ := p.allow(&restartLog{}, time.Now()); ok {
			t.Fatal("restart allowed with max 0")
		}
	})
}
