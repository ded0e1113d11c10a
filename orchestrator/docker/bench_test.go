package docker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/mapyard/mapyard/mapserver/kernel/latency"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/supervise"
)

// Each benchmark iteration takes several samples, because one sample costs about a
// second of real container work and `go test -bench` would otherwise stop at b.N=1.
const benchSamples = 5

// BenchmarkColdSpawn compares a cold spawn to ready (create, start, the map registers,
// start-instance, ready) with a raw create+start of the same image and container
// settings that nobody waits for, measured alternately in the same run. ratio is
// cold/raw; the target is ≤ 1.25.
func BenchmarkColdSpawn(b *testing.B) {
	h := newHarness(b, nil)
	ctx := context.Background()
	h.waitState(h.deployment+"-d", orchestrator.StateReady, 30*time.Second)
	var cold, raw latency.Recorder
	n := 0
	for b.Loop() {
		for range benchSamples {
			n++
			spec := supervise.Spec{InstanceID: fmt.Sprintf("%s-raw%d", h.deployment, n), MapID: "forest", Image: dockertest.MapImage()}
			spec.Env = append(append([]string(nil), h.sup.Env...), "MAP_INSTANCE_ID="+spec.InstanceID)
			t0 := time.Now()
			id, err := docker.CreateStart(ctx, h.rt, spec)
			if err != nil {
				b.Fatal(err)
			}
			raw.Add(time.Since(t0))
			if err := h.rt.Remove(ctx, id); err != nil {
				b.Fatal(err)
			}

			inst := fmt.Sprintf("%s-c%d", h.deployment, n)
			t0 = time.Now()
			h.create(inst)
			if _, err := h.sup.Acquire(ctx, inst); err != nil {
				b.Fatal(err)
			}
			cold.Add(time.Since(t0))
			if err := h.sup.Stop(ctx, inst); err != nil {
				b.Fatal(err)
			}
		}
	}
	c, r := cold.Quantile(0.5), raw.Quantile(0.5)
	b.ReportMetric(latency.Ms(c), "cold-ms")
	b.ReportMetric(latency.Ms(r), "raw-ms")
	b.ReportMetric(float64(c)/float64(r), "ratio")
}

// BenchmarkWarmPoolHandout measures creating an instance when a warm-pool container is
// ready until the instance is ready (rename, start-instance); the target p99 is ≤ 10 ms.
func BenchmarkWarmPoolHandout(b *testing.B) {
	h := newHarness(b, func(s *supervise.Supervisor) { s.PoolSize = 1 })
	ctx := context.Background()
	h.waitState(h.deployment+"-d", orchestrator.StateReady, 30*time.Second)
	var d latency.Recorder
	n := 0
	for b.Loop() {
		for range 2 * benchSamples {
			n++
			h.waitFor("pool ready", 30*time.Second, func() bool { return h.sup.Pool().Ready == 1 })
			inst := fmt.Sprintf("%s-w%d", h.deployment, n)
			t0 := time.Now()
			h.create(inst)
			if _, err := h.sup.Acquire(ctx, inst); err != nil {
				b.Fatal(err)
			}
			d.Add(time.Since(t0))
			if !h.sawTransition(inst, orchestrator.StateReady, "handed warm pool container") {
				b.Fatal("instance was not handed a pool container")
			}
			if err := h.sup.Stop(ctx, inst); err != nil {
				b.Fatal(err)
			}
		}
	}
	d.Report(b)
}

// BenchmarkKillToRestart measures the time from `docker kill -s KILL` of a ready map to
// the supervisor beginning its restart (state restarting); the target is ≤ 0.5 s.
func BenchmarkKillToRestart(b *testing.B) {
	h := newHarness(b, func(s *supervise.Supervisor) {
		s.Policy = supervise.RestartPolicy{Window: time.Minute, Max: 1000, Quarantine: time.Second}
	})
	ctx := context.Background()
	id := h.deployment + "-d"
	var d latency.Recorder
	for b.Loop() {
		for range benchSamples {
			inst := h.waitState(id, orchestrator.StateReady, 30*time.Second)
			t0 := time.Now()
			if err := h.cli.ContainerKill(ctx, inst.ContainerID, "KILL"); err != nil {
				b.Fatal(err)
			}
			var at time.Time
			h.waitFor("restart begun", 10*time.Second, func() bool {
				h.mu.Lock()
				defer h.mu.Unlock()
				for _, tr := range h.transitions {
					if tr.id == id && tr.to == orchestrator.StateRestarting && tr.at.After(t0) {
						at = tr.at
						return true
					}
				}
				return false
			})
			d.Add(at.Sub(t0))
		}
	}
	b.ReportMetric(latency.Ms(d.Quantile(0.5)), "median-ms")
	b.ReportMetric(latency.Ms(d.Quantile(1)), "max-ms")
}

// BenchmarkRawCreateStartScratch is the engine's own floor: create and start a trivial
// container of the FROM scratch map image (its -h prints help and exits), no network,
// no ports, no waiting.
func BenchmarkRawCreateStartScratch(b *testing.B) {
	cli := dockertest.Client(b)
	ctx := context.Background()
	deployment := "test-" + dockertest.RandomHex(b, 4)
	b.Cleanup(func() { dockertest.RemoveDeployment(b, cli, deployment) })
	var d latency.Recorder
	for b.Loop() {
		t0 := time.Now()
		id, err := createTrivial(ctx, cli, deployment)
		if err != nil {
			b.Fatal(err)
		}
		d.Add(time.Since(t0))
		docker.NewRuntime(cli, docker.Template{}).Remove(ctx, id)
	}
	b.ReportMetric(latency.Ms(d.Quantile(0.5)), "median-ms")
}

func createTrivial(ctx context.Context, cli *client.Client, deployment string) (string, error) {
	c, err := cli.ContainerCreate(ctx, &container.Config{
		Image:  dockertest.MapImage(),
		Cmd:    []string{"-h"},
		Labels: map[string]string{docker.LabelDeployment: deployment},
	}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		return "", err
	}
	return c.ID, cli.ContainerStart(ctx, c.ID, container.StartOptions{})
}
