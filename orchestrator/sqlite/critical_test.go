package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/items"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/critical"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
)

// MustCharacter creates a character with id and fails the test on error.
func MustCharacter(tb testing.TB, db *sqlite.DB, id string) {
	tb.Helper()
	if err := db.CreateCharacter(context.Background(), &orchestrator.Character{ID: id, KeyHash: "hash-" + id, Name: id}, 0); err != nil {
		tb.Fatal(err)
	}
}

// Event returns a critical event of kind with payload.
func Event(id, kind, payload string) record.CriticalEvent {
	return record.CriticalEvent{EventID: id, InstanceID: "i1", Kind: kind, MapTick: 42, Payload: []byte(payload)}
}

// Commit prepares ev as the orchestrator's domain does (envelope checks, item rules;
// a transfer boundary as a transfer request builds it from the state it carries) and
// commits it.
func Commit(tb testing.TB, db *sqlite.DB, ev record.CriticalEvent) (record.CriticalAck, error) {
	tb.Helper()
	if ev.Kind == record.EventTransferBoundary {
		var st record.CharacterState
		if err := json.Unmarshal(ev.Payload, &st); err != nil {
			tb.Fatal(err)
		}
		c, err := orchestrator.BoundaryCommit(ev.EventID, st)
		if err != nil {
			return record.CriticalAck{}, err
		}
		return db.CommitCritical(context.Background(), *c)
	}
	c, _, err := critical.Prepare(items.DefaultCatalog(), ev)
	if err != nil {
		return record.CriticalAck{}, err
	}
	return db.CommitCritical(context.Background(), c)
}

// MustCommit commits ev and fails the test on error.
func MustCommit(tb testing.TB, db *sqlite.DB, ev record.CriticalEvent) record.CriticalAck {
	tb.Helper()
	ack, err := Commit(tb, db, ev)
	if err != nil {
		tb.Fatalf("commit %s: %v", ev.EventID, err)
	}
	return ack
}

// ItemEvent returns a critical item event of instance i1.
func ItemEvent(id string, kind items.Kind, tick int64, m items.Move, exchange ...items.Move) record.CriticalEvent {
	return record.CriticalEvent{EventID: id, InstanceID: "i1", Kind: string(kind), MapTick: tick,
		Payload: items.Payload{Move: m, Exchange: exchange}.Encode()}
}

// MustSeed puts ordinary items on the ground of i1 and fails the test on error.
func MustSeed(tb testing.TB, db *sqlite.DB, list ...items.Item) {
	tb.Helper()
	err := db.SeedItems(context.Background(), func(items.Ledger) ([]items.Item, error) { return list, nil })
	if err != nil {
		tb.Fatal(err)
	}
}

// WantItems fails the test unless characterID holds exactly want (item id -> quantity).
func WantItems(tb testing.TB, db *sqlite.DB, characterID string, want map[string]int64) {
	tb.Helper()
	list, err := db.CharacterItems(context.Background(), characterID)
	if err != nil {
		tb.Fatal(err)
	}
	got := map[string]int64{}
	for _, it := range list {
		got[it.ID] = it.Quantity
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		tb.Fatalf("items of %s=%v, want %v", characterID, got, want)
	}
}

var (
	alice  = items.Place{CharacterID: "alice"}
	bob    = items.Place{CharacterID: "bob"}
	ground = items.Place{InstanceID: "i1", X: 100, Y: 100}
)

func TestDB_CommitCritical(t *testing.T) {
	ctx := context.Background()
	t.Run("DurableAcrossReopen", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "mapyard.db")
		db := sqlite.NewDB(path)
		if err := db.Open(); err != nil {
			t.Fatal(err)
		}
		ack := MustCommit(t, db, Event("e1", "quest_flag", `{ "flag" : "door" }`))
		if ack.Seq == 0 || ack.Duplicate {
			t.Fatalf("ack=%+v", ack)
		}
		// No Close: the event must be there as if the process had died right after the ack.
		db2 := MustOpenDBAt(t, path)
		ev, err := db2.CriticalEvent(ctx, "e1")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(ev.Payload), `{"flag":"door"}`; got != want || ev.Kind != "quest_flag" || ev.MapTick != 42 {
			t.Fatalf("event=%+v payload=%s, want %s", ev, got, want)
		}
		if rec := db2.Recovery(); rec.EventsAfterCheckpoint != 1 || rec.LastEventSeq != ack.Seq {
			t.Fatalf("recovery=%+v", rec)
		}
		db.Close()
	})
	t.Run("DuplicateReturnsFirstAck", func(t *testing.T) {
		db := MustOpenDB(t)
		MustPut(t, db, "i1", "world", 1, `{}`, true)
		if _, err := db.Checkpoint(ctx); err != nil { // an audit row, so audit ids and seqs differ
			t.Fatal(err)
		}
		MustCommit(t, db, Event("e0", "quest_flag", `{}`))
		first := MustCommit(t, db, Event("e1", "quest_flag", `{"a":1}`))
		again := MustCommit(t, db, Event("e1", "quest_flag", `{ "a": 1 }`))
		if !again.Duplicate || again.Seq != first.Seq || again.CommittedAtMs != first.CommittedAtMs {
			t.Fatalf("retry ack=%+v, first=%+v", again, first)
		}
		raw := MustRawDB(t, db.Path)
		if got := MustCount(t, raw, `SELECT COUNT(*) FROM critical_events`); got != 2 {
			t.Fatalf("events=%d, want 2", got)
		}
		if got := MustCount(t, raw, `SELECT seq FROM critical_events WHERE event_id = 'e1'`); int64(got) != first.Seq {
			t.Fatalf("ack seq=%d, stored seq=%d", first.Seq, got)
		}
	})
	t.Run("ErrConflictSameIDOtherEvent", func(t *testing.T) {
		db := MustOpenDB(t)
		MustCommit(t, db, Event("e1", "quest_flag", `{"a":1}`))
		_, err := Commit(t, db, Event("e1", "quest_flag", `{"a":2}`))
		WantCode(t, err, apierr.ECONFLICT)
	})
	t.Run("ErrBadRequestNoEventID", func(t *testing.T) {
		db := MustOpenDB(t)
		_, err := db.CommitCritical(ctx, orchestrator.CriticalCommit{Event: Event("", "k", `{}`)})
		WantCode(t, err, apierr.EBADREQUEST)
	})
}

func TestDB_CommitCritical_GroupCommit(t *testing.T) {
	// 64 submitters keep events waiting while each commit's fsync runs, so group commit
	// must carry several events per transaction; the one-per-event baseline must not.
	run := func(t *testing.T, maxBatch int) sqlite.Stats {
		db := MustOpenDB(t, func(db *sqlite.DB) { db.MaxCriticalBatch = maxBatch })
		var wg sync.WaitGroup
		for g := 0; g < 64; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; n < 10; n++ {
					if _, err := Commit(t, db, Event(fmt.Sprintf("g%d-%d", g, n), "quest_flag", `{}`)); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		st := db.Stats()
		if st.CriticalEvents != 640 {
			t.Fatalf("events=%d, want 640", st.CriticalEvents)
		}
		return st
	}
	t.Run("Grouped", func(t *testing.T) {
		if st := run(t, sqlite.DefaultMaxCriticalBatch); st.CriticalCommits >= st.CriticalEvents || st.LargestGroup < 2 {
			t.Fatalf("stats=%+v: events were not grouped", st)
		}
	})
	t.Run("OnePerEventBaseline", func(t *testing.T) {
		if st := run(t, 1); st.CriticalCommits != st.CriticalEvents || st.LargestGroup != 1 {
			t.Fatalf("stats=%+v: baseline grouped events", st)
		}
	})
}

func TestDB_CommitCritical_TransferBoundary(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	MustCharacter(t, db, "alice")
	MustPut(t, db, "i1", "character:alice", 3, `{"mapId":"meadow","instanceId":"i1","x":1,"y":2}`, true)
	if _, err := db.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	MustCommit(t, db, Event("b1", record.EventTransferBoundary,
		`{"characterId":"alice","mapId":"cave","instanceId":"i2","x":5,"y":6,"attributes":{"hp":9},"revision":4}`))
	s, err := db.CharacterState(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if s.MapID != "cave" || s.InstanceID != "i2" || s.Revision != 4 || string(s.Attributes) != `{"hp":9}` {
		t.Fatalf("state=%+v attrs=%s", s, s.Attributes)
	}
	// An older boundary is recorded but does not move the character back.
	MustCommit(t, db, Event("b0", record.EventTransferBoundary,
		`{"characterId":"alice","mapId":"meadow","instanceId":"i1","x":0,"y":0,"revision":2}`))
	if s, err := db.CharacterState(ctx, "alice"); err != nil || s.MapID != "cave" {
		t.Fatalf("state=%+v, %v; want cave", s, err)
	}
	// A newer character partition wins once pushed, before and after its checkpoint.
	MustPut(t, db, "i2", "character:alice", 5, `{"mapId":"cave","instanceId":"i2","x":7,"y":8}`, true)
	if s, err := db.CharacterState(ctx, "alice"); err != nil || s.Revision != 5 || s.X != 7 {
		t.Fatalf("state=%+v, %v; want revision 5", s, err)
	}
	if _, err := db.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	raw := MustRawDB(t, db.Path)
	if got := MustCount(t, raw, `SELECT COUNT(*) FROM character_state WHERE character_id = 'alice' AND revision = 5 AND x = 7`); got != 1 {
		t.Fatal("character state table not updated by checkpoint")
	}
	t.Run("ErrNotFoundCharacter", func(t *testing.T) {
		_, err := Commit(t, db, Event("b9", record.EventTransferBoundary,
			`{"characterId":"ghost","mapId":"m","instanceId":"i","revision":1}`))
		WantCode(t, err, apierr.ENOTFOUND)
	})
}

func TestDB_CommitCriticalBatch(t *testing.T) {
	ctx := context.Background()
	prepare := func(t *testing.T, evs ...record.CriticalEvent) []orchestrator.CriticalCommit {
		t.Helper()
		cs := make([]orchestrator.CriticalCommit, len(evs))
		for i, ev := range evs {
			c, _, err := critical.Prepare(items.DefaultCatalog(), ev)
			if err != nil {
				t.Fatal(err)
			}
			cs[i] = c
		}
		return cs
	}
	coin := func(id string) items.Item {
		return items.Item{ID: id, TemplateID: "coin", Quantity: 1, Place: ground, State: items.StateActive}
	}
	pickup := func(id, item string) record.CriticalEvent {
		return ItemEvent(id, items.KindPickup, 7, items.Move{ItemID: item, TemplateID: "coin", Quantity: 1, From: ground, To: alice})
	}
	t.Run("RefusedEventRolledBackAlone", func(t *testing.T) {
		db := MustOpenDB(t)
		MustCharacter(t, db, "alice")
		MustSeed(t, db, coin("c1"), coin("c2"))
		before := db.Stats()
		// p2 picks up c1 again: in order, p1 has just moved it to alice, so p2 is
		// refused and rolled back alone while p1 and p3 commit with it.
		batch := prepare(t, pickup("p1", "c1"), pickup("p2", "c1"), pickup("p3", "c2"))
		res := db.CommitCriticalBatch(ctx, batch)
		if len(res) != 3 || res[0].Err != nil || res[2].Err != nil || res[0].Ack.Seq == 0 || res[2].Ack.Seq <= res[0].Ack.Seq {
			t.Fatalf("results %+v", res)
		}
		WantCode(t, res[1].Err, items.CodeWrongPlace)
		if _, err := db.CriticalEvent(ctx, "p2"); apierr.Code(err) != apierr.ENOTFOUND {
			t.Fatalf("refused event recorded: %v", err)
		}
		WantItems(t, db, "alice", map[string]int64{"c1": 1, "c2": 1})
		if st := db.Stats(); st.CriticalCommits-before.CriticalCommits != 1 || st.CriticalEvents-before.CriticalEvents != 3 {
			t.Fatalf("stats %+v after %+v: want the batch in one commit", st, before)
		}
		t.Run("RetryAnsweredWithFirstAcks", func(t *testing.T) {
			again := db.CommitCriticalBatch(ctx, batch)
			for _, i := range []int{0, 2} {
				if again[i].Err != nil || !again[i].Ack.Duplicate || again[i].Ack.Seq != res[i].Ack.Seq {
					t.Fatalf("retry %d: %+v, want the first ack %+v", i, again[i], res[i])
				}
			}
			WantCode(t, again[1].Err, items.CodeWrongPlace)
		})
	})
	t.Run("ErrBadRequestNoEventIDAlone", func(t *testing.T) {
		db := MustOpenDB(t)
		res := db.CommitCriticalBatch(ctx, []orchestrator.CriticalCommit{
			{Event: Event("", "quest_flag", `{}`)}, {Event: Event("q1", "quest_flag", `{}`)}})
		WantCode(t, res[0].Err, apierr.EBADREQUEST)
		if res[1].Err != nil || res[1].Ack.Seq == 0 {
			t.Fatalf("results %+v", res)
		}
	})
	t.Run("RequestTakenWholeAtMaxBatchOne", func(t *testing.T) {
		db := MustOpenDB(t, func(db *sqlite.DB) { db.MaxCriticalBatch = 1 })
		res := db.CommitCriticalBatch(ctx, prepare(t, Event("q1", "quest_flag", `{}`), Event("q2", "quest_flag", `{}`)))
		if res[0].Err != nil || res[1].Err != nil {
			t.Fatalf("results %+v", res)
		}
		if st := db.Stats(); st.CriticalCommits != 1 || st.LargestGroup != 2 {
			t.Fatalf("stats %+v: want one commit of both", st)
		}
	})
	t.Run("GroupedUpToMaxBatchEvents", func(t *testing.T) {
		// 16 maps send batches of 10 at once: the writer groups whole batches, never
		// more than 25 events in one commit, and commits every event.
		db := MustOpenDB(t, func(db *sqlite.DB) { db.MaxCriticalBatch = 25 })
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				for n := range 5 {
					var evs []record.CriticalEvent
					for k := range 10 {
						evs = append(evs, Event(fmt.Sprintf("g%d-%d-%d", g, n, k), "quest_flag", `{}`))
					}
					for _, r := range db.CommitCriticalBatch(ctx, prepare(t, evs...)) {
						if r.Err != nil {
							t.Error(r.Err)
						}
					}
				}
			})
		}
		wg.Wait()
		if st := db.Stats(); st.CriticalEvents != 800 || st.LargestGroup > 25 || st.LargestGroup < 10 {
			t.Fatalf("stats %+v: want 800 events in groups of whole batches up to 25", st)
		}
	})
	t.Run("ErrUnavailableClosed", func(t *testing.T) {
		db := MustOpenDB(t)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		res := db.CommitCriticalBatch(ctx, prepare(t, Event("q1", "quest_flag", `{}`)))
		WantCode(t, res[0].Err, apierr.EUNAVAILABLE)
	})
}
