package supervise

import "time"

// RestartPolicy decides whether a failed map may be restarted now or must be
// quarantined: at most Max restarts within any Window; past that the instance is left
// alone for Quarantine. It holds no clock: callers pass the time, so the rule is tested
// with a fake clock.
type RestartPolicy struct {
	Window     time.Duration
	Max        int
	Quarantine time.Duration
}

// restartLog is the restarts of one instance still inside the policy's window.
type restartLog struct {
	times []time.Time
}

// allow records a restart at now and returns true if the policy permits it. When it
// does not, it returns false and the time the quarantine ends; the log is left as is.
func (p RestartPolicy) allow(l *restartLog, now time.Time) (ok bool, until time.Time) {
	keep := l.times[:0]
	for _, t := range l.times {
		if now.Sub(t) < p.Window {
			keep = append(keep, t)
		}
	}
	l.times = keep
	if len(l.times) >= p.Max {
		return false, now.Add(p.Quarantine)
	}
	l.times = append(l.times, now)
	return true, time.Time{}
}

// reset forgets every restart: a map whose quarantine is over gets a fresh window.
func (l *restartLog) reset() { l.times = l.times[:0] }

// count is the number of restarts recorded in the window ending at now.
func (p RestartPolicy) count(l *restartLog, now time.Time) int {
	n := 0
	for _, t := range l.times {
		if now.Sub(t) < p.Window {
			n++
		}
	}
	return n
}
