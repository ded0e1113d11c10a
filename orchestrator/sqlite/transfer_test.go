package sqlite_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/orchestrator"
)

func TestTransfers(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	tr := &orchestrator.Transfer{ID: "tr-1", CharacterID: "c1", Subject: "s", FromInstanceID: "a-1", ToInstanceID: "b-1",
		State: orchestrator.TransferRequested, Nonce: "n1", IssuedAt: time.UnixMilli(1000), ExpiresAt: time.UnixMilli(11000)}
	if err := db.CreateTransfer(ctx, tr); err != nil {
		t.Fatal(err)
	}
	t.Run("ErrConflictDuplicate", func(t *testing.T) {
		if err := db.CreateTransfer(ctx, tr); apierr.Code(err) != apierr.ECONFLICT {
			t.Fatalf("err %v, want conflict", err)
		}
	})
	t.Run("RoundTrip", func(t *testing.T) {
		got, err := db.Transfer(ctx, "tr-1")
		if err != nil || got.Nonce != "n1" || got.ExpiresAt.UnixMilli() != 11000 || got.State != orchestrator.TransferRequested {
			t.Fatalf("got %+v %v", got, err)
		}
		if _, err := db.Transfer(ctx, "nope"); apierr.Code(err) != apierr.ENOTFOUND {
			t.Fatalf("err %v, want not_found", err)
		}
	})
	t.Run("AdvanceOnce", func(t *testing.T) {
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := db.AdvanceTransfer(ctx, "tr-1", []orchestrator.TransferState{orchestrator.TransferRequested}, orchestrator.TransferTokenIssued, "")
				if err == nil {
					wins.Add(1)
				} else if apierr.Code(err) != apierr.ECONFLICT {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d callers advanced the transfer, want 1", wins.Load())
		}
		pending, err := db.PendingTransfers(ctx)
		if err != nil || len(pending) != 1 || pending[0].State != orchestrator.TransferTokenIssued {
			t.Fatalf("pending %+v %v", pending, err)
		}
		if _, err := db.AdvanceTransfer(ctx, "tr-1", []orchestrator.TransferState{orchestrator.TransferTokenIssued}, orchestrator.TransferAborted, "expired"); err != nil {
			t.Fatal(err)
		}
		if pending, _ := db.PendingTransfers(ctx); len(pending) != 0 {
			t.Fatalf("aborted transfer still pending: %+v", pending)
		}
	})
}

func TestLeases(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	if l, err := db.Lease(ctx, "c1"); err != nil || l.Epoch != 0 || l.InstanceID != "" {
		t.Fatalf("new character lease %+v %v", l, err)
	}
	if err := db.SetLease(ctx, orchestrator.Lease{CharacterID: "c1", InstanceID: "a-1", Epoch: 1}, 0); err != nil {
		t.Fatal(err)
	}
	t.Run("ErrConflictStaleEpoch", func(t *testing.T) {
		err := db.SetLease(ctx, orchestrator.Lease{CharacterID: "c1", InstanceID: "b-1", Epoch: 1}, 0)
		if apierr.Code(err) != apierr.ECONFLICT {
			t.Fatalf("err %v, want conflict", err)
		}
	})
	t.Run("ErrBadRequestEpochMustGrow", func(t *testing.T) {
		err := db.SetLease(ctx, orchestrator.Lease{CharacterID: "c1", InstanceID: "b-1", Epoch: 1}, 1)
		if apierr.Code(err) != apierr.EBADREQUEST {
			t.Fatalf("err %v, want bad_request", err)
		}
	})
	if err := db.SetLease(ctx, orchestrator.Lease{CharacterID: "c1", TransferID: "tr-9", Epoch: 2}, 1); err != nil {
		t.Fatal(err)
	}
	if l, _ := db.Lease(ctx, "c1"); l.Epoch != 2 || l.InstanceID != "" || l.TransferID != "tr-9" {
		t.Fatalf("lease %+v", l)
	}
}
