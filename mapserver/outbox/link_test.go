package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/mapserver/outbox"
)

// fakeOrch is a hand-written fake of the orchestrator's side of the control RPC, served
// over real HTTP so the link is tested through the real control client.
type fakeOrch struct {
	mu       sync.Mutex
	fail     map[string]int    // path → how many more calls answer failCode
	failCode map[string]string // path → code of those failures (default unavailable)
	hold     chan struct{}     // when set, persist-snapshot waits for it to close
	held     chan struct{}     // receives once per push that reached hold
	// holdCritical, when set, makes critical requests wait for it to close;
	// heldCritical receives once per request that reached it.
	holdCritical, heldCritical chan struct{}
	batches                    []int // the size of every batch request

	readyCalls, readies, beats int
	forgetAt                   int // the forgetAt-th heartbeat answers "not registered"
	players                    []int
	snaps                      []mapcontract.PersistSnapshot
	events                     []record.CriticalEvent
	transfers                  []mapcontract.TransferRequest
	results                    []mapcontract.TransferResult
	changed                    chan struct{}
}

func newFakeOrch(t *testing.T) (*fakeOrch, *mapcontract.Client) {
	f := &fakeOrch{fail: map[string]int{}, failCode: map[string]string{}, changed: make(chan struct{}, 1000)}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	return f, mapcontract.NewClient(srv.URL, "secret")
}

func (f *fakeOrch) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	path := r.URL.Path
	if path == mapcontract.PathPersistSnapshot {
		f.mu.Lock()
		hold, held := f.hold, f.held
		f.mu.Unlock()
		if hold != nil {
			held <- struct{}{}
			<-hold
		}
	}
	if path == mapcontract.PathPersistCritical || path == mapcontract.PathPersistCriticalBatch {
		f.mu.Lock()
		hold, held := f.holdCritical, f.heldCritical
		f.mu.Unlock()
		if hold != nil {
			held <- struct{}{}
			<-hold
		}
	}
	f.mu.Lock()
	defer func() {
		f.mu.Unlock()
		select {
		case f.changed <- struct{}{}:
		default:
		}
	}()
	if path == mapcontract.PathMapReady {
		f.readyCalls++
	}
	if f.fail[path] > 0 {
		f.fail[path]--
		code := f.failCode[path]
		if code == "" {
			code = apierr.EUNAVAILABLE
		}
		w.WriteHeader(apierr.Status(code))
		_ = json.NewEncoder(w).Encode(httpkit.ErrorResponse{Error: apierr.Error{Code: code, Message: "fake"}})
		return
	}
	var out any = map[string]bool{"ok": true}
	switch path {
	case mapcontract.PathMapReady:
		f.readies++
	case mapcontract.PathMapHeartbeat:
		var h mapcontract.Heartbeat
		_ = json.Unmarshal(body, &h)
		f.beats++
		f.players = append(f.players, h.Players)
		out = mapcontract.HeartbeatAnswer{Registered: f.beats != f.forgetAt}
	case mapcontract.PathPersistSnapshot:
		var s mapcontract.PersistSnapshot
		_ = json.Unmarshal(body, &s)
		f.snaps = append(f.snaps, s)
		out = mapcontract.PersistSnapshotAnswer{Accepted: true}
	case mapcontract.PathPersistCritical:
		var ev record.CriticalEvent
		_ = json.Unmarshal(body, &ev)
		f.events = append(f.events, ev)
		out = record.CriticalAck{EventID: ev.EventID, Seq: int64(len(f.events))}
	case mapcontract.PathPersistCriticalBatch:
		var b mapcontract.CriticalBatch
		_ = json.Unmarshal(body, &b)
		f.batches = append(f.batches, len(b.Events))
		a := mapcontract.CriticalBatchAnswer{}
		for _, ev := range b.Events {
			f.events = append(f.events, ev)
			a.Results = append(a.Results, mapcontract.CriticalResult{Ack: &record.CriticalAck{EventID: ev.EventID, Seq: int64(len(f.events))}})
		}
		out = a
	case mapcontract.PathRequestTransfer:
		var tr mapcontract.TransferRequest
		_ = json.Unmarshal(body, &tr)
		f.transfers = append(f.transfers, tr)
		out = mapcontract.TransferAnswer{TransferID: tr.TransferID, Token: "tok-" + tr.TransferID,
			ToInstanceID: tr.ToMapID + "-1", WS: "/maps/" + tr.ToMapID + "-1/ws"}
	case mapcontract.PathTransferResult:
		var tr mapcontract.TransferResult
		_ = json.Unmarshal(body, &tr)
		f.results = append(f.results, tr)
	}
	_ = json.NewEncoder(w).Encode(out)
}

// until waits for cond (checked under the fake's lock) to hold.
func (f *fakeOrch) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		f.mu.Lock()
		ok := cond()
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-f.changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func openLink(t *testing.T, c outbox.Orchestrator) *outbox.Link {
	t.Helper()
	l := outbox.New(c, mapcontract.MapReady{InstanceID: "a-1", MapID: "a"}, 5*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	l.RetryMin, l.RetryMax = time.Millisecond, 5*time.Millisecond
	l.QueueSize = 4
	if err := l.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func flush(t *testing.T, l *outbox.Link) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

func TestLink_Registration(t *testing.T) {
	t.Run("RetriesUntilRegistered", func(t *testing.T) {
		f, c := newFakeOrch(t)
		f.fail[mapcontract.PathMapReady] = 6 // more than the control client's own retries
		l := openLink(t, c)
		l.Players = func() int { return 7 }
		f.until(t, "registration and a heartbeat", func() bool { return f.readies == 1 && f.beats > 0 })
		if f.readyCalls != 7 {
			t.Fatalf("map-ready calls=%d, want 7", f.readyCalls)
		}
		f.until(t, "a heartbeat with the player count", func() bool { return len(f.players) > 1 && f.players[1] == 7 })
	})
	t.Run("AwayWhileHeartbeatsFail", func(t *testing.T) {
		f, c := newFakeOrch(t)
		l := openLink(t, c)
		f.until(t, "registration", func() bool { return f.readies == 1 })
		if l.Away() {
			t.Fatal("away while the orchestrator answers")
		}
		f.mu.Lock()
		f.fail[mapcontract.PathMapHeartbeat] = 1000
		f.mu.Unlock()
		waitUntil(t, "the link to say the orchestrator is away", l.Away)
		f.mu.Lock()
		f.fail[mapcontract.PathMapHeartbeat] = 0
		f.mu.Unlock()
		waitUntil(t, "the link to say it is back", func() bool { return !l.Away() })
	})
	t.Run("RegistersAgainWhenForgotten", func(t *testing.T) {
		f, c := newFakeOrch(t)
		f.forgetAt = 2
		openLink(t, c)
		f.until(t, "a second registration", func() bool { return f.readies == 2 })
	})
}

func TestLink_Push(t *testing.T) {
	t.Run("CoalescesToNewestWithGrowingRevisions", func(t *testing.T) {
		f, c := newFakeOrch(t)
		f.hold, f.held = make(chan struct{}), make(chan struct{}, 100)
		l := openLink(t, c)
		var revs []int64
		push := func(x float64) {
			rev, err := l.PushCharacter("c1", 3, int64(x), record.CharacterStatePayload{X: x})
			if err != nil {
				t.Fatal(err)
			}
			revs = append(revs, rev)
		}
		push(1)
		<-f.held // the first push is on the wire; the next ones wait behind it
		push(2)
		push(3)
		if _, err := l.Push(outbox.InstancePartition, 9, json.RawMessage(`{"npcs":200}`)); err != nil {
			t.Fatal(err)
		}
		close(f.hold)
		flush(t, l)
		for i := 1; i < len(revs); i++ {
			if revs[i] <= revs[i-1] {
				t.Fatalf("revisions not growing: %v", revs)
			}
		}
		var chars []mapcontract.PersistSnapshot
		for _, s := range f.snaps {
			if s.Partition == "character:c1" {
				chars = append(chars, s)
			}
		}
		if len(chars) != 2 || chars[0].Revision != revs[0] || chars[1].Revision != revs[2] {
			t.Fatalf("sent %+v, want revision %d then only the newest %d", chars, revs[0], revs[2])
		}
		var st record.CharacterStatePayload
		if err := json.Unmarshal(chars[1].Envelope.Payload, &st); err != nil || st.X != 3 || st.InstanceID != "a-1" || st.MapID != "a" {
			t.Fatalf("newest payload %s (%v), want x=3 on a-1 of map a", chars[1].Envelope.Payload, err)
		}
		if err := chars[1].Envelope.Validate(0); err != nil || chars[1].Epoch != 3 {
			t.Fatalf("envelope invalid (%v) or epoch %d != 3", err, chars[1].Epoch)
		}
		if len(f.snaps) != 3 {
			t.Fatalf("sent %d partitions, want 3", len(f.snaps))
		}
	})
	t.Run("RetriesTransientFailures", func(t *testing.T) {
		f, c := newFakeOrch(t)
		f.fail[mapcontract.PathPersistSnapshot] = 6
		l := openLink(t, c)
		if _, err := l.Push("zone-1", 1, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		flush(t, l)
		if len(f.snaps) != 1 {
			t.Fatalf("sent %d, want 1 after the failures", len(f.snaps))
		}
	})
	t.Run("DropsRefusedPush", func(t *testing.T) {
		f, c := newFakeOrch(t)
		f.fail[mapcontract.PathPersistSnapshot], f.failCode[mapcontract.PathPersistSnapshot] = 1, apierr.ECONFLICT
		l := openLink(t, c)
		if _, err := l.PushCharacter("gone", 1, 1, record.CharacterStatePayload{}); err != nil {
			t.Fatal(err)
		}
		flush(t, l)
		if len(f.snaps) != 0 {
			t.Fatalf("a refused push was sent again: %+v", f.snaps)
		}
	})
	t.Run("ErrQueueFullInsteadOfBlocking", func(t *testing.T) {
		f, c := newFakeOrch(t)
		f.hold, f.held = make(chan struct{}), make(chan struct{}, 100)
		l := openLink(t, c) // QueueSize 4
		defer close(f.hold)
		if _, err := l.Push("p0", 1, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		<-f.held
		for i := 1; i <= 4; i++ {
			if _, err := l.Push("p"+string(rune('0'+i)), 1, json.RawMessage(`{}`)); err != nil {
				t.Fatalf("push %d: %v", i, err)
			}
		}
		if _, err := l.Push("p9", 1, json.RawMessage(`{}`)); !errors.Is(err, outbox.ErrQueueFull) {
			t.Fatalf("fifth pending partition: err=%v, want ErrQueueFull", err)
		}
		if _, err := l.Push("p1", 1, json.RawMessage(`{"newer":true}`)); err != nil {
			t.Fatalf("a newer state of a pending partition must always fit: %v", err)
		}
	})
	t.Run("CharactersBeyondQueueSizeAllPushed", func(t *testing.T) {
		// A map holding more characters than QueueSize pushes them all every period;
		// none is refused, and the other partitions keep their bound.
		f, c := newFakeOrch(t)
		f.hold, f.held = make(chan struct{}), make(chan struct{}, 100)
		l := openLink(t, c) // QueueSize 4
		var release sync.Once
		defer release.Do(func() { close(f.hold) })
		if _, err := l.Push("p0", 1, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		<-f.held // the pusher waits on p0: everything below stays pending
		const chars = 10
		for i := range chars {
			id := fmt.Sprintf("c%02d", i)
			if _, err := l.PushCharacter(id, 1, 1, record.CharacterStatePayload{X: float64(i)}); err != nil {
				t.Fatalf("character %d of %d, QueueSize 4: %v", i+1, chars, err)
			}
		}
		for i := 1; i <= 4; i++ {
			if _, err := l.Push(fmt.Sprintf("p%d", i), 1, json.RawMessage(`{}`)); err != nil {
				t.Fatalf("push %d beside %d pending characters: %v", i, chars, err)
			}
		}
		if _, err := l.Push("p9", 1, json.RawMessage(`{}`)); !errors.Is(err, outbox.ErrQueueFull) {
			t.Fatalf("fifth pending partition beside characters: err=%v, want ErrQueueFull", err)
		}
		release.Do(func() { close(f.hold) })
		flush(t, l)
		got := map[string]bool{}
		f.mu.Lock()
		for _, s := range f.snaps {
			got[s.Partition] = true
		}
		f.mu.Unlock()
		for i := range chars {
			if p := record.CharacterPartition(fmt.Sprintf("c%02d", i)); !got[p] {
				t.Fatalf("character partition %s never reached the orchestrator (got %v)", p, got)
			}
		}
	})
	t.Run("PushDueOncePerPeriod", func(t *testing.T) {
		_, c := newFakeOrch(t)
		now := time.Unix(1000, 0)
		l := outbox.New(c, mapcontract.MapReady{InstanceID: "a-1"}, time.Hour, slog.New(slog.DiscardHandler))
		l.Now, l.PushEvery = func() time.Time { return now }, 10*time.Second
		if err := l.Open(); err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if l.PushDue() {
			t.Fatal("due at once after open")
		}
		now = now.Add(10 * time.Second)
		if !l.PushDue() || l.PushDue() {
			t.Fatal("want due exactly once after one period")
		}
	})
}

func TestLink_Critical(t *testing.T) {
	t.Run("AckAfterDurableCommitInOrder", func(t *testing.T) {
		f, c := newFakeOrch(t)
		f.fail[mapcontract.PathPersistCritical] = 5
		l := openLink(t, c)
		var mu sync.Mutex
		var acked []string
		for _, id := range []string{"e1", "e2", "e3"} {
			err := l.Critical(record.CriticalEvent{EventID: id, Kind: "item_spend"}, func(a record.CriticalAck, err error) {
				if err != nil {
					t.Errorf("event %s: %v", id, err)
				}
				mu.Lock()
				acked = append(acked, a.EventID)
				mu.Unlock()
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		flush(t, l)
		mu.Lock()
		defer mu.Unlock()
		if len(acked) != 3 || acked[0] != "e1" || acked[2] != "e3" {
			t.Fatalf("acks %v, want e1 e2 e3", acked)
		}
		if len(f.events) != 3 || f.events[0].InstanceID != "a-1" {
			t.Fatalf("committed %+v", f.events)
		}
	})
	t.Run("QueuedEventsGoInOneBatch", func(t *testing.T) {
		f, c := newFakeOrch(t)
		f.holdCritical, f.heldCritical = make(chan struct{}), make(chan struct{}, 8)
		f.fail[mapcontract.PathPersistCriticalBatch] = 1 // retried whole
		l := openLink(t, c)
		var acks []<-chan outbox.CriticalResult
		send := func(id string) {
			ch, err := l.CriticalChan(record.CriticalEvent{EventID: id, Kind: "item_spend"})
			if err != nil {
				t.Fatal(err)
			}
			acks = append(acks, ch)
		}
		send("e1")
		<-f.heldCritical // e1 is in flight alone
		for _, id := range []string{"e2", "e3", "e4", "e5"} {
			send(id)
		}
		f.mu.Lock()
		close(f.holdCritical)
		f.holdCritical = nil
		f.mu.Unlock()
		for i, ch := range acks {
			if r := <-ch; r.Err != nil || r.Ack.EventID != fmt.Sprintf("e%d", i+1) {
				t.Fatalf("event %d: %+v", i+1, r)
			}
		}
		flush(t, l)
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.batches) != 1 || f.batches[0] != 4 || len(f.events) != 5 {
			t.Fatalf("batches %v, events %d: want e1 alone, then one batch of 4", f.batches, len(f.events))
		}
		for i, ev := range f.events {
			if ev.EventID != fmt.Sprintf("e%d", i+1) || ev.InstanceID != "a-1" {
				t.Fatalf("committed %d: %+v", i, ev)
			}
		}
	})
	t.Run("WithoutBatchRouteOneByOne", func(t *testing.T) {
		f, c := newFakeOrch(t)
		f.fail[mapcontract.PathPersistCriticalBatch], f.failCode[mapcontract.PathPersistCriticalBatch] = 1, apierr.ENOTFOUND
		f.holdCritical, f.heldCritical = make(chan struct{}), make(chan struct{}, 8)
		l := openLink(t, c)
		var acks []<-chan outbox.CriticalResult
		for _, id := range []string{"e1", "e2", "e3"} {
			ch, err := l.CriticalChan(record.CriticalEvent{EventID: id, Kind: "item_spend"})
			if err != nil {
				t.Fatal(err)
			}
			acks = append(acks, ch)
			if id == "e1" {
				<-f.heldCritical
			}
		}
		f.mu.Lock()
		close(f.holdCritical)
		f.holdCritical = nil
		f.mu.Unlock()
		for i, ch := range acks {
			if r := <-ch; r.Err != nil {
				t.Fatalf("event %d: %v", i+1, r.Err)
			}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.events) != 3 || len(f.batches) != 0 {
			t.Fatalf("events %d, batches %v", len(f.events), f.batches)
		}
	})
	t.Run("RefusedEventReportsTheError", func(t *testing.T) {
		f, c := newFakeOrch(t)
		f.fail[mapcontract.PathPersistCritical], f.failCode[mapcontract.PathPersistCritical] = 1, apierr.ECONFLICT
		l := openLink(t, c)
		ch, err := l.CriticalChan(record.CriticalEvent{EventID: "e1"})
		if err != nil {
			t.Fatal(err)
		}
		if res := <-ch; apierr.Code(res.Err) != apierr.ECONFLICT {
			t.Fatalf("err=%v, want conflict", res.Err)
		}
	})
	t.Run("NotImplementedIsFinal", func(t *testing.T) {
		f, c := newFakeOrch(t)
		f.fail[mapcontract.PathPersistCritical], f.failCode[mapcontract.PathPersistCritical] = 1<<30, apierr.ENOTIMPLEMENTED
		l := openLink(t, c)
		ch, err := l.CriticalChan(record.CriticalEvent{EventID: "e1"})
		if err != nil {
			t.Fatal(err)
		}
		if res := <-ch; apierr.Code(res.Err) != apierr.ENOTIMPLEMENTED {
			t.Fatalf("err=%v, want not_implemented without retrying until close", res.Err)
		}
	})
	t.Run("CloseFailsQueuedWork", func(t *testing.T) {
		f, c := newFakeOrch(t)
		f.fail[mapcontract.PathPersistCritical] = 1 << 30
		l := openLink(t, c)
		ch, err := l.CriticalChan(record.CriticalEvent{EventID: "e1"})
		if err != nil {
			t.Fatal(err)
		}
		f.until(t, "a first attempt", func() bool { return f.fail[mapcontract.PathPersistCritical] < 1<<30 })
		l.Close()
		if res := <-ch; !errors.Is(res.Err, outbox.ErrClosed) {
			t.Fatalf("err=%v, want ErrClosed", res.Err)
		}
		if err := l.Critical(record.CriticalEvent{EventID: "e2"}, nil); !errors.Is(err, outbox.ErrClosed) {
			t.Fatalf("after close: err=%v, want ErrClosed", err)
		}
	})
}

func TestLink_Transfer(t *testing.T) {
	t.Run("Granted", func(t *testing.T) {
		f, c := newFakeOrch(t)
		f.fail[mapcontract.PathRequestTransfer] = 5
		l := openLink(t, c)
		out := make(chan outbox.TransferOutcome, 1)
		err := l.RequestTransfer(mapcontract.TransferRequest{CharacterID: "c1", ToMapID: "b", Epoch: 2,
			State: record.CharacterState{X: 4, Y: 5}}, func(o outbox.TransferOutcome) { out <- o })
		if err != nil {
			t.Fatal(err)
		}
		o := <-out
		if o.Denied() || o.Answer.Token == "" || o.Answer.ToInstanceID != "b-1" {
			t.Fatalf("outcome %+v", o)
		}
		ids := map[string]bool{}
		for _, tr := range f.transfers {
			ids[tr.TransferID] = true
		}
		if len(ids) != 1 || f.transfers[0].FromInstanceID != "a-1" || f.transfers[0].State.Revision <= 0 {
			t.Fatalf("retries must repeat one transfer id from a-1 with a revision: %+v", f.transfers)
		}
	})
	t.Run("DeniedQuarantined", func(t *testing.T) {
		f, c := newFakeOrch(t)
		f.fail[mapcontract.PathRequestTransfer], f.failCode[mapcontract.PathRequestTransfer] = 100, apierr.EMAPQUARANTINED
		l := openLink(t, c)
		out := make(chan outbox.TransferOutcome, 1)
		if err := l.RequestTransfer(mapcontract.TransferRequest{CharacterID: "c1", ToMapID: "b"}, func(o outbox.TransferOutcome) { out <- o }); err != nil {
			t.Fatal(err)
		}
		if o := <-out; !o.Denied() || o.Code != apierr.EMAPQUARANTINED {
			t.Fatalf("outcome %+v, want denied map_quarantined", o)
		}
	})
	t.Run("GivesUpAfterLimit", func(t *testing.T) {
		f, c := newFakeOrch(t)
		f.fail[mapcontract.PathRequestTransfer] = 1 << 30
		l := openLink(t, c)
		l.TransferLimit = 50 * time.Millisecond
		out := make(chan outbox.TransferOutcome, 1)
		if err := l.RequestTransfer(mapcontract.TransferRequest{CharacterID: "c1", ToMapID: "b"}, func(o outbox.TransferOutcome) { out <- o }); err != nil {
			t.Fatal(err)
		}
		if o := <-out; !o.Denied() || o.Code != apierr.EMAPUNAVAILABLE {
			t.Fatalf("outcome %+v, want denied map_unavailable", o)
		}
	})
	t.Run("ReportRetried", func(t *testing.T) {
		f, c := newFakeOrch(t)
		f.fail[mapcontract.PathTransferResult] = 5
		l := openLink(t, c)
		if err := l.ReportTransfer(mapcontract.TransferResult{TransferID: "tr-1", Success: true}); err != nil {
			t.Fatal(err)
		}
		flush(t, l)
		if len(f.results) != 1 || f.results[0].InstanceID != "a-1" {
			t.Fatalf("reports %+v", f.results)
		}
	})
}

// waitUntil polls cond until it holds, failing after 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
