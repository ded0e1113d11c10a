package sqlite_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/orchestrator"
)

// TestAdmit checks that a redeem's writes are one transaction: all of them, or none
// when any one is refused.
func TestAdmit(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	ch := &orchestrator.Character{KeyHash: "kh1", Name: "ada"}
	if err := db.CreateCharacter(ctx, ch, 0); err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Minute)
	lease := func(epoch int64) orchestrator.Lease {
		return orchestrator.Lease{CharacterID: ch.ID, Subject: "kh1", InstanceID: "a-1", Epoch: epoch}
	}
	if _, err := db.Admit(ctx, orchestrator.Admission{Nonce: "n1", ExpiresAt: exp, Owner: "kh1", Lease: lease(1)}); err != nil {
		t.Fatal(err)
	}
	if l, _ := db.Lease(ctx, ch.ID); l.Epoch != 1 || l.InstanceID != "a-1" {
		t.Fatalf("lease %+v", l)
	}
	t.Run("ErrTicketUsed", func(t *testing.T) {
		_, err := db.Admit(ctx, orchestrator.Admission{Nonce: "n1", ExpiresAt: exp, Owner: "kh1", Lease: lease(2), PrevEpoch: 1})
		WantCode(t, err, apierr.ETICKETUSED)
		if l, _ := db.Lease(ctx, ch.ID); l.Epoch != 1 {
			t.Fatalf("lease moved by a used nonce: %+v", l)
		}
	})
	t.Run("ErrConflictLeaseKeepsNonce", func(t *testing.T) {
		_, err := db.Admit(ctx, orchestrator.Admission{Nonce: "n2", ExpiresAt: exp, Lease: lease(2), PrevEpoch: 0})
		WantCode(t, err, apierr.ECONFLICT)
		// Nothing was written: the nonce is still unused.
		if _, err := db.Admit(ctx, orchestrator.Admission{Nonce: "n2", ExpiresAt: exp, Lease: lease(2), PrevEpoch: 1}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ErrNotFoundOwner", func(t *testing.T) {
		_, err := db.Admit(ctx, orchestrator.Admission{Nonce: "n3", ExpiresAt: exp, Owner: "kh2", Lease: lease(3), PrevEpoch: 2})
		WantCode(t, err, apierr.ENOTFOUND)
		if err := db.UseNonce(ctx, "n3", exp); err != nil {
			t.Fatalf("nonce of a refused admission used: %v", err)
		}
	})
	t.Run("SupersedeAndAccept", func(t *testing.T) {
		for _, id := range []string{"tr-1", "tr-2"} {
			tr := &orchestrator.Transfer{ID: id, CharacterID: ch.ID, Subject: "kh1", FromInstanceID: "a-1", ToInstanceID: "b-1",
				State: orchestrator.TransferTokenIssued, Nonce: "t" + id, IssuedAt: time.UnixMilli(1000), ExpiresAt: exp}
			if err := db.CreateTransfer(ctx, tr); err != nil {
				t.Fatal(err)
			}
		}
		superseded, err := db.Admit(ctx, orchestrator.Admission{Nonce: "n4", ExpiresAt: exp, Owner: "kh1", Lease: lease(3), PrevEpoch: 2, Supersede: "tr-1"})
		if err != nil || !superseded {
			t.Fatalf("supersede: %v %v", superseded, err)
		}
		if tr, _ := db.Transfer(ctx, "tr-1"); tr.State != orchestrator.TransferAborted {
			t.Fatalf("superseded transfer %+v", tr)
		}
		// A transfer that moved on is left as it is.
		if superseded, err := db.Admit(ctx, orchestrator.Admission{Nonce: "n5", ExpiresAt: exp, Lease: lease(4), PrevEpoch: 3, Supersede: "tr-1"}); err != nil || superseded {
			t.Fatalf("supersede again: %v %v", superseded, err)
		}
		if _, err := db.Admit(ctx, orchestrator.Admission{Nonce: "n6", ExpiresAt: exp, Lease: lease(5), PrevEpoch: 4, Accept: "tr-2"}); err != nil {
			t.Fatal(err)
		}
		if tr, _ := db.Transfer(ctx, "tr-2"); tr.State != orchestrator.TransferDestinationAccepted {
			t.Fatalf("accepted transfer %+v", tr)
		}
		// Accepting twice is refused, and leaves the nonce and the lease alone.
		_, err = db.Admit(ctx, orchestrator.Admission{Nonce: "n7", ExpiresAt: exp, Lease: lease(6), PrevEpoch: 5, Accept: "tr-2"})
		WantCode(t, err, apierr.ECONFLICT)
		if l, _ := db.Lease(ctx, ch.ID); l.Epoch != 5 {
			t.Fatalf("lease %+v after a refused accept", l)
		}
	})
}

// TestWriteGroup races writes that succeed and writes that are refused, so the writer
// commits them in groups: every caller gets its own answer, and exactly the accepted
// writes are stored.
func TestWriteGroup(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	exp := time.Now().Add(time.Minute)
	const n = 400
	for i := 0; i < n; i += 2 { // every other nonce is used already
		if err := db.UseNonce(ctx, fmt.Sprintf("n%d", i), exp); err != nil {
			t.Fatal(err)
		}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = db.Admit(ctx, orchestrator.Admission{Nonce: fmt.Sprintf("n%d", i), ExpiresAt: exp,
				Lease: orchestrator.Lease{CharacterID: fmt.Sprintf("c%d", i), InstanceID: "a-1", Epoch: 1}})
		}()
	}
	close(start)
	wg.Wait()
	if g := db.Stats().LargestWriteGroup; g < 2 {
		t.Fatalf("largest write group %d: the writes were not grouped", g)
	}
	for i, err := range errs {
		want := ""
		if i%2 == 0 {
			want = apierr.ETICKETUSED
		}
		if got := apierr.Code(err); got != want {
			t.Fatalf("admit %d: %v, want %q", i, err, want)
		}
		l, err := db.Lease(ctx, fmt.Sprintf("c%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := l.Epoch, int64(i%2); got != want {
			t.Fatalf("lease %d epoch %d, want %d", i, got, want)
		}
	}
}
