package main

// The soak's faults that need a switch of the kit's (see soak_faults_test.go): a map
// that runs out of memory, a slow orchestrator and a full disk under its database.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/client"
	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// soakDataSize is the tmpfs the orchestrator's data directory lives on: room for a
// long run's database, small enough to fill in a moment.
const soakDataSize = "256m"

// mountDataVolume mounts a tmpfs of soakDataSize on a new directory and returns it,
// unmounted when the test ends: the orchestrator's data volume, which the disk-full
// fault fills. It survives the orchestrator's kills, as a host's volume would.
func mountDataVolume(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+soakDataSize+",mode=0700"); err != nil {
		t.Fatalf("mount a tmpfs for the orchestrator's data (the soak's full disk needs root): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// outOfMemory has map instance id allocate until its memory limit kills it, and waits
// until it plays again in a new container, the kill seen as out-of-memory.
func (s *soak) outOfMemory(t *testing.T, id string) error {
	old := s.k.instance(t, id).ContainerID
	if err := s.k.cli.ContainerKill(context.Background(), old, "SIGUSR1"); err != nil {
		t.Fatalf("docker kill -s USR1 %s: %v", id, err)
	}
	var inst orchestrator.Instance
	waitFor(t, id+" restarted after its out-of-memory kill", 60*time.Second, func() bool {
		inst = s.k.instance(t, id)
		return inst.State == orchestrator.StateReady && inst.ContainerID != old
	})
	if !inst.OOMKilled {
		return fmt.Errorf("%s restarted with oomKilled false (last exit code %v), want an out-of-memory kill", id, inst.LastExitCode)
	}
	return nil
}

// setControlDelay sets the orchestrator's slow-orchestrator switch.
func (s *soak) setControlDelay(t *testing.T, d time.Duration) {
	t.Helper()
	testutil.Do(t, http.MethodPut, s.control+httpapi.PathAdminFaults, s.k.secret,
		httpapi.FaultsRequest{ControlDelayMs: d.Milliseconds()}, http.StatusOK, nil)
}

// slowOrchestrator holds every call of the maps and the edge soakSlowDelay for
// soakHold: the players keep playing (their maps tick without the orchestrator) and a
// join through the edge must still work, only slower. It returns what the joins took.
func (s *soak) slowOrchestrator(t *testing.T) (string, error) {
	s.setControlDelay(t, soakSlowDelay)
	defer s.setControlDelay(t, 0)
	end := time.Now().Add(soakHold)
	var took []time.Duration
	for time.Now().Before(end) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := s.joinOnce(ctx, `{}`)
		cancel()
		if err != nil {
			return "", fmt.Errorf("a join while the orchestrator was slow: %w", err)
		}
		c.Close()
		took = append(took, time.Since(start))
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	return fmt.Sprintf("%d joins while slow, the slowest in %s", len(took), took[len(took)-1].Round(10*time.Millisecond)), nil
}

// diskFull fills the orchestrator's data volume to the last byte and holds it full for
// soakHold while new players (new characters: durable work) try to join: each is
// answered or refused storage_full, never anything else. Then it frees the space; the
// recovery that follows (inject) shows the kit back without a restart.
func (s *soak) diskFull(t *testing.T) (string, error) {
	fill := filepath.Join(filepath.Dir(s.k.dbPath), "fill")
	if err := fillDisk(fill); err != nil {
		t.Fatal(err)
	}
	freed := false
	free := func() {
		if !freed {
			freed = true
			if err := os.Remove(fill); err != nil {
				t.Errorf("free the data volume: %v", err)
			}
		}
	}
	defer free()
	end := time.Now().Add(soakHold)
	answers := map[string]int{}
	var odd []string
	for i := 0; time.Now().Before(end); i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := s.joinOnce(ctx, fmt.Sprintf(`{"authKey":"soakfull%016x%08d"}`, s.seed, i))
		cancel()
		code := apierr.Code(err)
		var refused *client.ServerError // the map's refusal of the hello, its redeem refused
		if errors.As(err, &refused) {
			code = refused.Code
		}
		switch {
		case err == nil:
			c.Close()
			answers["joined"]++
		case code == apierr.ESTORAGEFULL:
			answers[code]++
		default:
			answers["other"]++
			odd = append(odd, err.Error())
		}
		time.Sleep(200 * time.Millisecond)
	}
	full := metricSum(s.metrics(context.Background(), s.control+httpkit.PathMetrics), "mapyard_db_storage_full_total")
	free()
	note := fmt.Sprintf("new players while full: %d joined, %d refused storage_full; the orchestrator refused %d writes storage_full",
		answers["joined"], answers[apierr.ESTORAGEFULL], full)
	if len(odd) > 0 {
		return note, fmt.Errorf("%d joins while the disk was full failed otherwise than storage_full: %s", len(odd), strings.Join(odd, "; "))
	}
	return note, nil
}

// fillDisk writes zeros to path until its file system has no byte left.
func fillDisk(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				// The last partial block too: what is left is smaller than buf.
				for n := len(buf) / 2; n > 0; n /= 2 {
					for {
						if _, err := f.Write(buf[:n]); err != nil {
							break
						}
					}
				}
				return nil
			}
			return fmt.Errorf("fill %s: %w", path, err)
		}
	}
}
