package client

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/latency"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
)

// Workload W1's bot behaviour (docs/benchmarks.md): an input every tick, a new random
// direction every 0.75 to 1.25 s.
const (
	W1InputHz    = 30
	W1TurnMin    = 750 * time.Millisecond
	W1TurnSpread = 500 * time.Millisecond
	W1PingEvery  = time.Second
	maxDirection = 127
)

// Ticket is what a join answers: the ticket to say hello with and where.
type Ticket struct {
	Ticket      string `json:"ticket"`
	CharacterID string `json:"characterId"`
	MapID       string `json:"mapId"`
	InstanceID  string `json:"instanceId"`
	WS          string `json:"ws"`
}

// Join asks the public edge at baseURL (http://host:port) for a guest join ticket
// (POST /api/v1/join).
func Join(ctx context.Context, hc *http.Client, baseURL string) (Ticket, error) {
	var t Ticket
	err := httpkit.Call(ctx, hc, http.MethodPost, baseURL+public.PathJoin, "", struct{}{}, &t)
	return t, err
}

// Swarm is N bots playing workload W1 against one map. Set the fields, then Run.
type Swarm struct {
	// JoinURL is the public edge (http://host:port) the bots join through.
	JoinURL string
	// MapURL, when set, is dialled instead of the join answer's ws path (bots straight
	// at a map's game port, bypassing the edge's proxy).
	MapURL string
	// N bots join at JoinPerSec (0: all at once), then each moves unless Idle.
	N          int
	JoinPerSec int
	Idle       bool
	// Shards is how many sender goroutines drive the bots (0: one per 64 bots).
	Shards int
	Seed   uint64
	// Spread, when set, saves every bot at a random position of the map before it
	// connects (see Spread), instead of letting it start at a spawn point.
	Spread *Spread
	// Options are every bot's client options.
	Options Options
	// Rejoin, with Options.Resume, makes a bot whose resume fails join anew as it
	// joined first (Options.Rejoin).
	Rejoin bool

	mu   sync.Mutex
	bots []*Client
	// JoinFailures counts bots that could not join or connect; JoinError is the first
	// reason.
	JoinFailures int
	JoinError    error
}

// Connect joins and connects the N bots, at most JoinPerSec per second.
func (s *Swarm) Connect(ctx context.Context) error {
	hc := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	var pace <-chan time.Time
	if s.JoinPerSec > 0 {
		t := time.NewTicker(time.Second / time.Duration(s.JoinPerSec))
		defer t.Stop()
		pace = t.C
	}
	for i := 0; i < s.N; i++ {
		if pace != nil {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-pace:
			}
		}
		wg.Add(1)
		r := rand.New(rand.NewPCG(s.Seed, uint64(i)<<32))
		go func() {
			defer wg.Done()
			c, err := s.connect(ctx, hc, r)
			s.mu.Lock()
			defer s.mu.Unlock()
			if err != nil {
				if s.JoinFailures++; s.JoinError == nil {
					s.JoinError = err
				}
				return
			}
			s.bots = append(s.bots, c)
		}()
	}
	wg.Wait()
	if len(s.bots) == 0 {
		return fmt.Errorf("no bot could join (%d failures, the first: %w)", s.JoinFailures, s.JoinError)
	}
	return nil
}

func (s *Swarm) connect(ctx context.Context, hc *http.Client, r *rand.Rand) (*Client, error) {
	url, hello, err := s.join(ctx, hc, r)
	if err != nil {
		return nil, err
	}
	opt := s.Options
	if s.Rejoin {
		// The bot's generator is the rejoin's alone once it is connected.
		opt.Rejoin = func(ctx context.Context) (string, Hello, error) { return s.join(ctx, hc, r) }
	}
	return Dial(ctx, url, hello, opt)
}

// join asks for one bot's ticket and says where to dial with it.
func (s *Swarm) join(ctx context.Context, hc *http.Client, r *rand.Rand) (string, Hello, error) {
	var t Ticket
	var err error
	if s.Spread != nil {
		t, err = s.Spread.join(ctx, hc, s.JoinURL, r)
	} else {
		t, err = Join(ctx, hc, s.JoinURL)
	}
	if err != nil {
		return "", Hello{}, err
	}
	url := s.MapURL
	if url == "" {
		url = "ws" + trimHTTP(s.JoinURL) + t.WS
	}
	return url, Hello{Ticket: t.Ticket}, nil
}

func trimHTTP(u string) string {
	if len(u) >= 4 && u[:4] == "http" {
		return u[4:]
	}
	return u
}

// Bots returns the connected bots.
func (s *Swarm) Bots() []*Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bots)
}

// Drive makes every bot's W1 inputs (and a ping a second) until ctx ends; each bot
// sends its inputs batched, one message per snapshot it receives (Client.Move).
func (s *Swarm) Drive(ctx context.Context) {
	bots := s.Bots()
	shards := s.Shards
	if shards <= 0 {
		shards = (len(bots) + 63) / 64
	}
	var wg sync.WaitGroup
	for k := 0; k < shards; k++ {
		var mine []*Client
		for i := k; i < len(bots); i += shards {
			mine = append(mine, bots[i])
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.drive(ctx, mine, rand.New(rand.NewPCG(s.Seed, uint64(k))))
		}()
	}
	wg.Wait()
}

// walker is one bot's W1 state: its direction and when it next turns.
type walker struct {
	c      *Client
	dx, dy int
	turnAt time.Time
	pingAt time.Time
}

func (s *Swarm) drive(ctx context.Context, bots []*Client, r *rand.Rand) {
	now := time.Now()
	ws := make([]walker, len(bots))
	for i, c := range bots {
		ws[i] = walker{c: c, pingAt: now.Add(time.Duration(r.Int64N(int64(W1PingEvery))))}
	}
	t := time.NewTicker(time.Second / W1InputHz)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now = <-t.C:
		}
		for i := range ws {
			w := &ws[i]
			if !s.Idle {
				if !now.Before(w.turnAt) {
					a := r.Float64() * 2 * math.Pi
					w.dx, w.dy = int(math.Round(maxDirection*math.Cos(a))), int(math.Round(maxDirection*math.Sin(a)))
					w.turnAt = now.Add(W1TurnMin + time.Duration(r.Int64N(int64(W1TurnSpread))))
				}
				_, _ = w.c.Move(w.dx, w.dy)
			}
			if !now.Before(w.pingAt) {
				_ = w.c.Ping()
				w.pingAt = now.Add(W1PingEvery)
			}
		}
	}
}

// ResetStats starts a measurement window on every bot.
func (s *Swarm) ResetStats() {
	for _, c := range s.Bots() {
		c.ResetStats()
	}
}

// Close closes every bot.
func (s *Swarm) Close() {
	var wg sync.WaitGroup
	for _, c := range s.Bots() {
		wg.Add(1)
		go func() { defer wg.Done(); c.Close() }()
	}
	wg.Wait()
}

// Report sums the bots' counters over a window of the given length.
type Report struct {
	Bots         int     `json:"bots"`
	JoinFailures int     `json:"joinFailures"`
	Dropped      int     `json:"dropped"`
	WindowSec    float64 `json:"windowSec"`
	// Per client means over the window.
	SnapshotsPerSec float64 `json:"snapshotsPerSec"`
	MinSnapshotsSec float64 `json:"minSnapshotsPerSec"`
	KbitDown        float64 `json:"kbitDownPerClient"`
	KbitSnapshots   float64 `json:"kbitSnapshotsPerClient"`
	KbitUp          float64 `json:"kbitUpPerClient"`
	// MessagesUp is the messages a client sent a second: what the edge and the map
	// pay a read and a parse for (one batch per snapshot and a ping a second, moving).
	MessagesUp     float64 `json:"messagesUpPerClient"`
	EntitiesInView float64 `json:"entitiesInView"`
	FullSnapshots  int64   `json:"fullSnapshots"`
	BadSnapshots   int64   `json:"badSnapshots"`
	Errors         int64   `json:"errors"`
	RTTP50Ms       float64 `json:"rttP50Ms"`
	RTTP99Ms       float64 `json:"rttP99Ms"`
	RTTMaxMs       float64 `json:"rttMaxMs"`
	BytesPerEntity float64 `json:"snapshotBytesPerEntity"`
	BotsCPUPercent float64 `json:"botsCpuPercent"`
	ForeignCPUPct  float64 `json:"foreignCpuPercent,omitempty"`
	SnapshotsTotal int64   `json:"snapshotsTotal"`
	// Resumes counts the bots' connections that dropped and came back (Options.Resume)
	// and how long they took, from the drop to the new welcome.
	Resumes          int64   `json:"resumes"`
	ResumeP50Ms      float64 `json:"resumeP50Ms"`
	ResumeP99Ms      float64 `json:"resumeP99Ms"`
	ResumeMaxMs      float64 `json:"resumeMaxMs"`
	EntitiesSeenSum  int64   `json:"-"`
	SnapshotBytesSum int64   `json:"-"`
}

// Report collects the bots' counters for a window of length window.
func (s *Swarm) Report(window time.Duration) Report {
	bots := s.Bots()
	sec := window.Seconds()
	r := Report{Bots: len(bots), JoinFailures: s.JoinFailures, WindowSec: sec, MinSnapshotsSec: math.Inf(1)}
	var rtts, resumes latency.Recorder
	var down, up, msgsUp, snapBytes int64
	for _, c := range bots {
		st := c.Stats()
		if st.Dropped {
			r.Dropped++
		}
		r.SnapshotsTotal += st.Snapshots
		r.FullSnapshots += st.FullSnapshots
		r.BadSnapshots += st.BadSnapshots
		r.Errors += st.Errors
		r.EntitiesSeenSum += st.EntitiesSeen
		down += st.BytesDown
		up += st.BytesUp
		msgsUp += st.MessagesUp
		snapBytes += st.SnapshotBytes
		r.MinSnapshotsSec = min(r.MinSnapshotsSec, float64(st.Snapshots)/sec)
		rtts.AddAll(st.RTT)
		r.Resumes += st.Resumes
		resumes.AddAll(st.ResumeTimes)
	}
	if n := float64(len(bots)); n > 0 && sec > 0 {
		r.SnapshotsPerSec = float64(r.SnapshotsTotal) / n / sec
		r.KbitDown = float64(down) * 8 / 1000 / n / sec
		r.KbitUp = float64(up) * 8 / 1000 / n / sec
		r.MessagesUp = float64(msgsUp) / n / sec
		r.KbitSnapshots = float64(snapBytes) * 8 / 1000 / n / sec
	} else {
		r.MinSnapshotsSec = 0
	}
	if r.SnapshotsTotal > 0 {
		r.EntitiesInView = float64(r.EntitiesSeenSum) / float64(r.SnapshotsTotal)
	}
	if r.EntitiesSeenSum > 0 {
		r.BytesPerEntity = float64(snapBytes) / float64(r.EntitiesSeenSum)
	}
	r.SnapshotBytesSum = snapBytes
	r.RTTP50Ms, r.RTTP99Ms, r.RTTMaxMs = latency.Ms(rtts.Quantile(0.5)), latency.Ms(rtts.Quantile(0.99)), latency.Ms(rtts.Quantile(1))
	r.ResumeP50Ms, r.ResumeP99Ms, r.ResumeMaxMs = latency.Ms(resumes.Quantile(0.5)), latency.Ms(resumes.Quantile(0.99)), latency.Ms(resumes.Quantile(1))
	return r
}
