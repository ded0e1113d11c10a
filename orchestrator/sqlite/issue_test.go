package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
)

// TestIssueTransfer checks that a transfer request's writes are one transaction: the
// transfer, the final state and the lease in transit all, or none of them when any one
// is refused.
func TestIssueTransfer(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	ch := &orchestrator.Character{KeyHash: "kh1", Name: "ada"}
	if err := db.CreateCharacter(ctx, ch, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Admit(ctx, orchestrator.Admission{Nonce: "n0", ExpiresAt: time.Now().Add(time.Minute), Owner: "kh1",
		Lease: orchestrator.Lease{CharacterID: ch.ID, Subject: "kh1", InstanceID: "a-1", Epoch: 1}}); err != nil {
		t.Fatal(err)
	}
	issue := func(id string, x float64, prevEpoch int64) orchestrator.TransferIssue {
		boundary, err := orchestrator.BoundaryCommit("transfer-"+id, record.CharacterState{CharacterID: ch.ID, InstanceID: "a-1", MapID: "a", X: x, Revision: 7})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		return orchestrator.TransferIssue{
			Transfer: &orchestrator.Transfer{ID: id, CharacterID: ch.ID, Subject: "kh1", FromInstanceID: "a-1", ToInstanceID: "b-1",
				State: orchestrator.TransferTokenIssued, Nonce: "nonce-" + id, IssuedAt: now, ExpiresAt: now.Add(10 * time.Second)},
			Boundary:  boundary,
			Lease:     orchestrator.Lease{CharacterID: ch.ID, Subject: "kh1", Epoch: prevEpoch + 1, TransferID: id},
			PrevEpoch: prevEpoch,
		}
	}
	nothingOf := func(id string) {
		t.Helper()
		if _, err := db.Transfer(ctx, id); apierr.Code(err) != apierr.ENOTFOUND {
			t.Errorf("transfer %s was recorded: %v", id, err)
		}
		if _, err := db.CriticalEvent(ctx, "transfer-"+id); apierr.Code(err) != apierr.ENOTFOUND {
			t.Errorf("the final state of %s was recorded: %v", id, err)
		}
	}

	t.Run("LeaseMovedWritesNothing", func(t *testing.T) {
		err := db.IssueTransfer(ctx, issue("tr-stale", 5, 4))
		if apierr.Code(err) != apierr.ECONFLICT {
			t.Fatalf("issue with a stale epoch: %v, want conflict", err)
		}
		nothingOf("tr-stale")
		if l, _ := db.Lease(ctx, ch.ID); l.Epoch != 1 || l.InstanceID != "a-1" {
			t.Fatalf("lease %+v changed", l)
		}
	})
	t.Run("AllTogether", func(t *testing.T) {
		if err := db.IssueTransfer(ctx, issue("tr-1", 42, 1)); err != nil {
			t.Fatal(err)
		}
		tr, err := db.Transfer(ctx, "tr-1")
		if err != nil || tr.State != orchestrator.TransferTokenIssued || tr.Nonce != "nonce-tr-1" {
			t.Fatalf("transfer %+v %v", tr, err)
		}
		if ev, err := db.CriticalEvent(ctx, "transfer-tr-1"); err != nil || ev.Kind != record.EventTransferBoundary {
			t.Fatalf("final state event %+v %v", ev, err)
		}
		if st, err := db.CharacterState(ctx, ch.ID); err != nil || st.X != 42 {
			t.Fatalf("character state %+v %v", st, err)
		}
		if l, _ := db.Lease(ctx, ch.ID); l.Epoch != 2 || l.InstanceID != "" || l.TransferID != "tr-1" {
			t.Fatalf("lease %+v, want in transit on tr-1 at epoch 2", l)
		}
	})
	t.Run("TransferIdTakenWritesNothing", func(t *testing.T) {
		it := issue("tr-1", 99, 2)
		it.Boundary.Event.EventID = "transfer-tr-1-again"
		if err := db.IssueTransfer(ctx, it); apierr.Code(err) != apierr.ECONFLICT {
			t.Fatalf("issue with a used transfer id: %v, want conflict", err)
		}
		if _, err := db.CriticalEvent(ctx, "transfer-tr-1-again"); apierr.Code(err) != apierr.ENOTFOUND {
			t.Errorf("the final state was recorded: %v", err)
		}
		if l, _ := db.Lease(ctx, ch.ID); l.Epoch != 2 {
			t.Fatalf("lease %+v changed", l)
		}
	})
	t.Run("BadInput", func(t *testing.T) {
		it := issue("tr-bad", 1, 2)
		it.Transfer.State = orchestrator.TransferRequested
		if err := db.IssueTransfer(ctx, it); apierr.Code(err) != apierr.EBADREQUEST {
			t.Fatalf("issue at requested: %v, want bad_request", err)
		}
		nothingOf("tr-bad")
	})
}
