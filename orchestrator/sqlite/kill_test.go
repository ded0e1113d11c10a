package sqlite_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/critical"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
)

// Environment of the kill-test child process.
const (
	killChildDBEnv  = "MAPYARD_KILL_CHILD_DB"
	killChildRunEnv = "MAPYARD_KILL_CHILD_RUN"
)

// killCharacter picks up the items the child seeds on killGround.
const killCharacter = "kill-picker"

var killGround = items.Place{InstanceID: "i1", X: 7, Y: 7}

// killPartitions are the snapshot partitions the child keeps pushing and checkpointing.
var killPartitions = []string{"world", "npcs", "items", "doors"}

// TestDB_KillRecovery re-executes the test binary as a child that commits critical
// events from many goroutines and checkpoints snapshots, SIGKILLs it at random moments,
// and checks after every kill that every acknowledged event is present exactly once with
// its effect applied once, that the file passes integrity_check, and that snapshots rolled
// back no further than the last checkpoint the child saw complete.
func TestDB_KillRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("kill test runs real processes")
	}
	const kills = 24
	path := filepath.Join(t.TempDir(), "mapyard.db")
	acked := map[string]bool{}         // every event id ever acknowledged
	checkpointed := map[string]int64{} // partition -> newest revision reported checkpointed
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4))
	for run := 0; run < kills; run++ {
		acks, ckpts := runKillChild(t, path, run, time.Duration(20+rng.IntN(230))*time.Millisecond)
		for _, id := range acks {
			acked[id] = true
		}
		for p, rev := range ckpts {
			checkpointed[p] = max(checkpointed[p], rev)
		}
		verifyAfterKill(t, path, run, acked, checkpointed)
	}
	if len(acked) == 0 || len(checkpointed) == 0 {
		t.Fatalf("children acknowledged %d events and %d checkpointed partitions; the test proved nothing", len(acked), len(checkpointed))
	}
	t.Logf("%d kills, %d acknowledged events, checkpointed revisions %v", kills, len(acked), checkpointed)
}

// runKillChild starts one child, kills it d after it reported it is ready (database
// open, so a slow start on a busy machine never eats the window) and returns the event
// ids it acknowledged and the newest checkpointed revision per partition it reported.
func runKillChild(t *testing.T, path string, run int, d time.Duration) (acks []string, ckpts map[string]int64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDB_KillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildDBEnv+"="+path, killChildRunEnv+"="+strconv.Itoa(run))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ckpts = map[string]int64{}
	done, ready := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() { // a line cut by the kill has no newline and never scans
			switch f := strings.Fields(sc.Text()); {
			case len(f) == 1 && f[0] == "ready":
				close(ready)
			case len(f) == 2 && f[0] == "ack":
				acks = append(acks, f[1])
			case len(f) > 1 && f[0] == "ckpt":
				for _, kv := range f[1:] {
					p, rev, _ := strings.Cut(kv, "=")
					n, _ := strconv.ParseInt(rev, 10, 64)
					ckpts[p] = max(ckpts[p], n)
				}
			}
		}
	}()
	select {
	case <-ready:
		time.Sleep(d)
	case <-done: // it failed before it was ready; Wait below reports how
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("kill child %d: %v", run, err)
	}
	<-done
	_ = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("child %d ended with %v; it should have been killed (see its stderr above)", run, cmd.ProcessState)
	}
	return acks, ckpts
}

// verifyAfterKill reopens the database the way the orchestrator would after a crash.
func verifyAfterKill(t *testing.T, path string, run int, acked map[string]bool, checkpointed map[string]int64) {
	t.Helper()
	ctx := context.Background()
	db := sqlite.NewDB(path)
	db.CheckpointInterval = -1
	if err := db.Open(); err != nil {
		t.Fatalf("run %d: reopen: %v", run, err)
	}
	defer db.Close()
	if err := db.IntegrityCheck(ctx); err != nil {
		t.Fatalf("run %d: %v", run, err)
	}

	raw := MustRawDB(t, path)
	count := map[string]int{}
	rows, err := raw.Query(`SELECT event_id FROM critical_events`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		count[id]++
	}
	rows.Close()
	held := map[string]bool{}
	list, err := db.CharacterItems(ctx, killCharacter)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range list {
		held[it.ID] = true
	}
	for id := range acked {
		if count[id] != 1 {
			t.Fatalf("run %d: acknowledged event %s present %d times", run, id, count[id])
		}
		if item, ok := strings.CutSuffix(id, "-pickup"); ok && !held[item] {
			t.Fatalf("run %d: acknowledged pickup %s but the item is not held", run, id)
		}
	}
	// Every item is held exactly when its pickup is durable: never both on the ground and
	// held (one row per item), never gone.
	for item := range held {
		if count[item+"-pickup"] != 1 {
			t.Fatalf("run %d: item %s held without its pickup event", run, item)
		}
	}

	for _, p := range killPartitions {
		want := checkpointed[p]
		s, err := db.Snapshot(ctx, "i1", p)
		if want == 0 {
			continue
		} else if err != nil {
			t.Fatalf("run %d: partition %s checkpointed at %d but gone: %v", run, p, want, err)
		}
		if s.Revision < want {
			t.Fatalf("run %d: partition %s rolled back to %d, past its checkpoint at %d", run, p, s.Revision, want)
		}
		if got := string(s.Envelope.Payload); got != fmt.Sprintf(`{"rev":%d}`, s.Revision) {
			t.Fatalf("run %d: partition %s revision %d has payload %s", run, p, s.Revision, got)
		}
	}
}

// TestDB_KillChild is the child process of TestDB_KillRecovery; it does nothing in a
// normal test run. It never returns: the parent kills it.
func TestDB_KillChild(t *testing.T) {
	path := os.Getenv(killChildDBEnv)
	if path == "" {
		t.Skip("only runs as the child of TestDB_KillRecovery")
	}
	run := os.Getenv(killChildRunEnv)
	ctx := context.Background()
	db := sqlite.NewDB(path)
	db.CheckpointInterval = -1 // the child checkpoints itself so it knows what each covered
	if err := db.Open(); err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	if err := db.CreateCharacter(ctx, &orchestrator.Character{ID: killCharacter, KeyHash: "hash-" + killCharacter, Name: "k"}, 0); err != nil && apierr.Code(err) != apierr.ECONFLICT {
		fmt.Fprintln(os.Stderr, "child character:", err)
		os.Exit(2)
	}
	cat := items.DefaultCatalog()
	var outMu sync.Mutex
	report := func(line string) { // one write per line, so a kill never interleaves lines
		outMu.Lock()
		defer outMu.Unlock()
		os.Stdout.WriteString(line + "\n")
	}

	report("ready")

	go func() { // snapshots: push the next revision of every partition, checkpoint, report
		revs := map[string]int64{}
		for _, p := range killPartitions {
			if s, err := db.Snapshot(ctx, "i1", p); err == nil {
				revs[p] = s.Revision // continue after what recovery brought back
			}
		}
		for {
			var line strings.Builder
			line.WriteString("ckpt")
			for _, p := range killPartitions {
				revs[p]++
				payload := json.RawMessage(fmt.Sprintf(`{"rev":%d}`, revs[p]))
				if _, err := db.PutSnapshot(ctx, "i1", p, revs[p], record.NewSnapshotEnvelope("sim-1", revs[p], 0, payload)); err != nil {
					fmt.Fprintln(os.Stderr, "child put:", err)
					os.Exit(2)
				}
				fmt.Fprintf(&line, " %s=%d", p, revs[p])
			}
			if _, err := db.Checkpoint(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "child checkpoint:", err)
				os.Exit(2)
			}
			report(line.String())
			time.Sleep(2 * time.Millisecond)
		}
	}()

	for g := 0; g < 32; g++ {
		go func() {
			for n := 0; ; n++ {
				id := fmt.Sprintf("r%s-g%d-%d", run, g, n)
				ev := record.CriticalEvent{EventID: id, InstanceID: "i1", Kind: "quest_flag", MapTick: int64(n), Payload: []byte(`{}`)}
				if n%2 == 0 { // a pickup of an item seeded just before
					item := id
					err := db.SeedItems(ctx, func(items.Ledger) ([]items.Item, error) {
						return []items.Item{{ID: item, TemplateID: "coin", Quantity: 1, Place: killGround, State: items.StateActive}}, nil
					})
					if err != nil {
						fmt.Fprintln(os.Stderr, "child seed:", err)
						os.Exit(2)
					}
					id += "-pickup"
					ev = ItemEvent(id, items.KindPickup, int64(n), mv(item, "coin", 1, killGround, items.Place{CharacterID: killCharacter}))
				}
				c, _, err := critical.Prepare(cat, ev)
				if err != nil {
					fmt.Fprintln(os.Stderr, "child prepare:", err)
					os.Exit(2)
				}
				if _, err := db.CommitCritical(ctx, c); err != nil {
					fmt.Fprintln(os.Stderr, "child commit:", err)
					os.Exit(2)
				}
				report("ack " + id)
				if n%5 == 0 { // a retry must not apply the event twice
					if ack, err := db.CommitCritical(ctx, c); err != nil || !ack.Duplicate {
						fmt.Fprintln(os.Stderr, "child retry:", ack, err)
						os.Exit(2)
					}
				}
			}
		}()
	}
	select {}
}
