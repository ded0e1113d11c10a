package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/mapyard/mapyard/mapserver/client"
)

// probeChild is the first argument that runs mapbots as a probe process.
const probeChild = "probe-child"

// prober is workload W3's probe: one more player, joined before the bots, that stands
// still, acknowledges snapshots as a page does and pings at its own interval, so its
// round trips and snapshot rate show what one player lives through beside the crowd. It
// runs in a child process of its own: inside the bots' process its pongs would wait for
// a processor behind the goroutines decoding the crowd's snapshots, and its round trips
// would measure the bots instead of the map.
type prober struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// startProbe starts the probe process, which joins as the bots join (through joinURL,
// or straight to mapURL) and pings every interval until it is closed.
func startProbe(ctx context.Context, joinURL, mapURL string, every time.Duration) (*prober, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	cmd := exec.CommandContext(ctx, self, probeChild, "-join", joinURL, "-map", mapURL, "-every", every.String())
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	return &prober{cmd: cmd, in: in, out: bufio.NewReader(out)}, nil
}

// ask sends the probe one command line and decodes its one-line JSON answer into v.
func (p *prober) ask(cmd string, v any) error {
	if cmd != "" {
		if _, err := io.WriteString(p.in, cmd+"\n"); err != nil {
			return fmt.Errorf("probe: %w", err)
		}
	}
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("probe said %q: %w", line, err)
	}
	return nil
}

// position waits for the probe's first snapshot and returns where it stands, in world
// units: the spawn point the bots gather around.
func (p *prober) position() (x, y float64, err error) {
	var at struct{ X, Y float64 }
	err = p.ask("", &at)
	return at.X, at.Y, err
}

// reset starts the probe's measurement window.
func (p *prober) reset() error {
	var ok struct{}
	return p.ask("reset", &ok)
}

// report is the probe's figures over a window of the given length.
func (p *prober) report(window time.Duration) (client.Report, error) {
	var r client.Report
	err := p.ask("report "+strconv.FormatFloat(window.Seconds(), 'f', 3, 64), &r)
	return r, err
}

// close ends the probe process.
func (p *prober) close() {
	p.in.Close()
	_ = p.cmd.Wait()
}

// runProbeChild is the probe process: it joins one idle player, prints its position
// once a snapshot shows it, then answers "reset" and "report <seconds>" lines on stdin
// until stdin closes.
func runProbeChild(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(probeChild, flag.ContinueOnError)
	fs.SetOutput(stderr)
	joinURL := fs.String("join", "", "public edge base URL")
	mapURL := fs.String("map", "", "WebSocket URL to dial instead of the join answer's")
	every := fs.Duration("every", 250*time.Millisecond, "ping interval")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &client.Swarm{JoinURL: *joinURL, MapURL: *mapURL, N: 1, Idle: true}
	if err := s.Connect(ctx); err != nil {
		fmt.Fprintln(stderr, "mapbots probe:", err)
		return 1
	}
	defer s.Close()
	c := s.Bots()[0]
	go func() {
		t := time.NewTicker(*every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.Done():
				return
			case <-t.C:
				_ = c.Ping()
			}
		}
	}()
	x, y, err := selfPosition(ctx, c)
	if err != nil {
		fmt.Fprintln(stderr, "mapbots probe:", err)
		return 1
	}
	enc := json.NewEncoder(stdout)
	_ = enc.Encode(struct{ X, Y float64 }{x, y})
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		switch cmd {
		case "reset":
			s.ResetStats()
			_ = enc.Encode(struct{}{})
		case "report":
			sec, err := strconv.ParseFloat(arg, 64)
			if err != nil {
				fmt.Fprintln(stderr, "mapbots probe: bad report line", sc.Text())
				return 2
			}
			_ = enc.Encode(s.Report(time.Duration(sec * float64(time.Second))))
		}
	}
	return 0
}

// selfPosition waits for a snapshot that shows the player itself and returns its
// position in world units.
func selfPosition(ctx context.Context, c *client.Client) (x, y float64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if e, ok := c.State().SelfEntity(); ok {
			x, y = client.Position(e)
			return x, y, nil
		}
		select {
		case <-ctx.Done():
			return 0, 0, errors.New("no snapshot showed the probe itself within 10s")
		case <-t.C:
		}
	}
}
