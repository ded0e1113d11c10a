package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/apierr"
	"github.com/mapyard/mapyard/orchestrator/control"
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
func Event(id, kind, payload string) control.CriticalEvent {
	return control.CriticalEvent{EventID: id, InstanceID: "i1", Kind: kind, MapTick: 42, Payload: []byte(payload)}
}

// MustCommit commits ev and fails the test on error.
func MustCommit(tb testing.TB, db *sqlite.DB, ev control.CriticalEvent) control.CriticalAck {
	tb.Helper()
	ack, err := db.CommitCritical(context.Background(), ev)
	if err != nil {
		tb.Fatalf("commit %s: %v", ev.EventID, err)
	}
	return ack
}

// WantItems fails the test unless owner holds exactly want (item id -> quantity).
func WantItems(tb testing.TB, db *sqlite.DB, owner control.ItemOwner, want map[string]int64) {
	tb.Helper()
	items, err := db.Items(context.Background(), owner)
	if err != nil {
		tb.Fatal(err)
	}
	got := map[string]int64{}
	for _, it := range items {
		got[it.ItemID] = it.Quantity
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		tb.Fatalf("items of %+v=%v, want %v", owner, got, want)
	}
}

var (
	alice = control.ItemOwner{CharacterID: "alice"}
	bob   = control.ItemOwner{CharacterID: "bob"}
	chest = control.ItemOwner{ContainerID: "i1/chest-1"}
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
	t.Run("DuplicateGrantAppliedOnce", func(t *testing.T) {
		db := MustOpenDB(t)
		MustCharacter(t, db, "alice")
		grant := Event("g1", control.EventItemGrant, `{"itemId":"gold","itemKind":"coin","quantity":10,"to":{"characterId":"alice"}}`)
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ { // concurrent retries land in one group or several
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := db.CommitCritical(ctx, grant); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		WantItems(t, db, alice, map[string]int64{"gold": 10})
	})
	t.Run("ErrConflictSameIDOtherEvent", func(t *testing.T) {
		db := MustOpenDB(t)
		MustCommit(t, db, Event("e1", "quest_flag", `{"a":1}`))
		_, err := db.CommitCritical(ctx, Event("e1", "quest_flag", `{"a":2}`))
		WantCode(t, err, apierr.ECONFLICT)
	})
	t.Run("BadInput", func(t *testing.T) {
		big := fmt.Sprintf(`{"x":"%0*d"}`, control.MaxCriticalPayloadBytes, 0)
		for _, tc := range []struct {
			name string
			ev   control.CriticalEvent
			code string
		}{
			{"ErrNoEventID", Event("", "k", `{}`), apierr.EBADREQUEST},
			{"ErrNoKind", Event("e", "", `{}`), apierr.EBADREQUEST},
			{"ErrMalformedPayload", Event("e", "k", `{"a":`), apierr.EBADREQUEST},
			{"ErrPayloadNotObject", Event("e", "k", `"str"`), apierr.EBADREQUEST},
			{"ErrTooLarge", Event("e", "k", big), apierr.ETOOLARGE},
			{"ErrGrantUnknownField", Event("e", control.EventItemGrant, `{"itemId":"x","itemKind":"k","quantity":1,"to":{"characterId":"alice"},"qty":2}`), apierr.EBADREQUEST},
			{"ErrGrantTwoOwners", Event("e", control.EventItemGrant, `{"itemId":"x","itemKind":"k","quantity":1,"to":{"characterId":"alice","containerId":"c"}}`), apierr.EBADREQUEST},
			{"ErrSpendZero", Event("e", control.EventItemSpend, `{"itemId":"x","from":{"characterId":"alice"},"quantity":0}`), apierr.EBADREQUEST},
			{"ErrDropToCharacter", Event("e", control.EventItemDrop, `{"itemId":"x","from":{"characterId":"alice"},"to":{"characterId":"bob"}}`), apierr.EBADREQUEST},
			{"ErrEmptyTrade", Event("e", control.EventTrade, `{"moves":[]}`), apierr.EBADREQUEST},
			{"ErrBoundaryNoRevision", Event("e", control.EventTransferBoundary, `{"characterId":"alice","mapId":"m","instanceId":"i"}`), apierr.EBADREQUEST},
		} {
			t.Run(tc.name, func(t *testing.T) {
				db := MustOpenDB(t)
				_, err := db.CommitCritical(ctx, tc.ev)
				WantCode(t, err, tc.code)
				raw := MustRawDB(t, db.Path)
				if got := MustCount(t, raw, `SELECT COUNT(*) FROM critical_events`); got != 0 {
					t.Fatalf("events=%d after bad input", got)
				}
				if got := MustCount(t, raw, `SELECT COUNT(*) FROM audit_log`); got != 0 {
					t.Fatalf("audit rows=%d after bad input", got)
				}
			})
		}
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
					if _, err := db.CommitCritical(context.Background(), Event(fmt.Sprintf("g%d-%d", g, n), "quest_flag", `{}`)); err != nil {
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

func TestDB_CommitCritical_Items(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) *sqlite.DB {
		db := MustOpenDB(t)
		MustCharacter(t, db, "alice")
		MustCharacter(t, db, "bob")
		MustCommit(t, db, Event("g1", control.EventItemGrant, `{"itemId":"sword","itemKind":"sword","quantity":1,"to":{"characterId":"alice"}}`))
		MustCommit(t, db, Event("g2", control.EventItemGrant, `{"itemId":"gold-a","itemKind":"coin","quantity":50,"to":{"characterId":"alice"}}`))
		MustCommit(t, db, Event("g3", control.EventItemGrant, `{"itemId":"gem","itemKind":"gem","quantity":1,"to":{"characterId":"bob"}}`))
		return db
	}
	t.Run("GrantAddsToStack", func(t *testing.T) {
		db := setup(t)
		MustCommit(t, db, Event("g4", control.EventItemGrant, `{"itemId":"gold-a","itemKind":"coin","quantity":5,"to":{"characterId":"alice"}}`))
		WantItems(t, db, alice, map[string]int64{"gold-a": 55, "sword": 1})
	})
	t.Run("ErrConflictGrantOtherOwner", func(t *testing.T) {
		db := setup(t)
		_, err := db.CommitCritical(ctx, Event("g4", control.EventItemGrant, `{"itemId":"gold-a","itemKind":"coin","quantity":5,"to":{"characterId":"bob"}}`))
		WantCode(t, err, apierr.ECONFLICT)
		WantItems(t, db, alice, map[string]int64{"gold-a": 50, "sword": 1})
		WantItems(t, db, bob, map[string]int64{"gem": 1})
	})
	t.Run("TransferMovesOwnership", func(t *testing.T) {
		db := setup(t)
		MustCommit(t, db, Event("t1", control.EventItemTransfer, `{"itemId":"sword","from":{"characterId":"alice"},"to":{"characterId":"bob"}}`))
		WantItems(t, db, alice, map[string]int64{"gold-a": 50})
		WantItems(t, db, bob, map[string]int64{"gem": 1, "sword": 1})
	})
	t.Run("DropToContainer", func(t *testing.T) {
		db := setup(t)
		MustCommit(t, db, Event("d1", control.EventItemDrop, `{"itemId":"sword","from":{"characterId":"alice"},"to":{"containerId":"i1/chest-1"}}`))
		WantItems(t, db, chest, map[string]int64{"sword": 1})
	})
	t.Run("SpendDecrementsThenDeletes", func(t *testing.T) {
		db := setup(t)
		MustCommit(t, db, Event("s1", control.EventItemSpend, `{"itemId":"gold-a","from":{"characterId":"alice"},"quantity":20}`))
		WantItems(t, db, alice, map[string]int64{"gold-a": 30, "sword": 1})
		MustCommit(t, db, Event("s2", control.EventItemSpend, `{"itemId":"gold-a","from":{"characterId":"alice"},"quantity":30}`))
		WantItems(t, db, alice, map[string]int64{"sword": 1})
	})
	t.Run("ErrConflictOverspend", func(t *testing.T) {
		db := setup(t)
		_, err := db.CommitCritical(ctx, Event("s1", control.EventItemSpend, `{"itemId":"gold-a","from":{"characterId":"alice"},"quantity":51}`))
		WantCode(t, err, apierr.ECONFLICT)
		WantItems(t, db, alice, map[string]int64{"gold-a": 50, "sword": 1})
		if _, err := db.CriticalEvent(ctx, "s1"); apierr.Code(err) != apierr.ENOTFOUND {
			t.Fatalf("failed event was recorded: %v", err)
		}
	})
	t.Run("ErrConflictNotOwner", func(t *testing.T) {
		db := setup(t)
		_, err := db.CommitCritical(ctx, Event("t1", control.EventItemTransfer, `{"itemId":"gem","from":{"characterId":"alice"},"to":{"characterId":"alice2"}}`))
		WantCode(t, err, apierr.ECONFLICT)
		WantItems(t, db, bob, map[string]int64{"gem": 1})
	})
	t.Run("ErrNotFoundCharacter", func(t *testing.T) {
		db := setup(t)
		_, err := db.CommitCritical(ctx, Event("t1", control.EventItemTransfer, `{"itemId":"sword","from":{"characterId":"alice"},"to":{"characterId":"nobody"}}`))
		WantCode(t, err, apierr.ENOTFOUND)
		WantItems(t, db, alice, map[string]int64{"gold-a": 50, "sword": 1})
	})
	t.Run("TradeAllOrNothing", func(t *testing.T) {
		db := setup(t)
		// The second move is invalid (alice does not hold the gem), so the first is undone.
		_, err := db.CommitCritical(ctx, Event("tr1", control.EventTrade, `{"moves":[
			{"itemId":"sword","from":{"characterId":"alice"},"to":{"characterId":"bob"}},
			{"itemId":"gem","from":{"characterId":"alice"},"to":{"characterId":"bob"}}]}`))
		WantCode(t, err, apierr.ECONFLICT)
		WantItems(t, db, alice, map[string]int64{"gold-a": 50, "sword": 1})
		WantItems(t, db, bob, map[string]int64{"gem": 1})

		MustCommit(t, db, Event("tr2", control.EventTrade, `{"moves":[
			{"itemId":"sword","from":{"characterId":"alice"},"to":{"characterId":"bob"}},
			{"itemId":"gem","from":{"characterId":"bob"},"to":{"characterId":"alice"}}]}`))
		WantItems(t, db, alice, map[string]int64{"gold-a": 50, "gem": 1})
		WantItems(t, db, bob, map[string]int64{"sword": 1})
	})
	t.Run("FailingEventDoesNotPoisonGroup", func(t *testing.T) {
		db := setup(t)
		// Many concurrent events, each alternate one invalid: the valid ones all commit
		// (whatever groups the writer forms) and the invalid ones all fail alone.
		const n = 64
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				ev := Event(fmt.Sprintf("g-%d", i), control.EventItemGrant,
					fmt.Sprintf(`{"itemId":"it-%d","itemKind":"k","quantity":1,"to":{"characterId":"bob"}}`, i))
				if i%2 == 1 {
					ev = Event(fmt.Sprintf("bad-%d", i), control.EventItemSpend,
						fmt.Sprintf(`{"itemId":"missing-%d","from":{"characterId":"bob"},"quantity":1}`, i))
				}
				_, errs[i] = db.CommitCritical(ctx, ev)
			}(i)
		}
		wg.Wait()
		want := map[string]int64{"gem": 1}
		for i, err := range errs {
			if i%2 == 1 {
				if apierr.Code(err) != apierr.ENOTFOUND {
					t.Errorf("event %d: err=%v, want not_found", i, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("event %d: %v", i, err)
			}
			want[fmt.Sprintf("it-%d", i)] = 1
		}
		WantItems(t, db, bob, want)
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
	MustCommit(t, db, Event("b1", control.EventTransferBoundary,
		`{"characterId":"alice","mapId":"cave","instanceId":"i2","x":5,"y":6,"attributes":{"hp":9},"revision":4}`))
	s, err := db.CharacterState(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if s.MapID != "cave" || s.InstanceID != "i2" || s.Revision != 4 || string(s.Attributes) != `{"hp":9}` {
		t.Fatalf("state=%+v attrs=%s", s, s.Attributes)
	}
	// An older boundary is recorded but does not move the character back.
	MustCommit(t, db, Event("b0", control.EventTransferBoundary,
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
		_, err := db.CommitCritical(ctx, Event("b9", control.EventTransferBoundary,
			`{"characterId":"ghost","mapId":"m","instanceId":"i","revision":1}`))
		WantCode(t, err, apierr.ENOTFOUND)
	})
}
