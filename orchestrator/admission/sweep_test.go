package admission_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/admission"
)

// recordingStore records every state a transfer is written in, in order, by
// IssueTransfer, AdvanceTransfer or a redeem's Admit, and counts the store's write
// transactions a transfer makes.
type recordingStore struct {
	admission.Store
	mu     sync.Mutex
	states []orchestrator.TransferState
	writes int
}

func (r *recordingStore) wrote(state ...orchestrator.TransferState) {
	r.mu.Lock()
	r.states = append(r.states, state...)
	r.writes++
	r.mu.Unlock()
}

func (r *recordingStore) IssueTransfer(ctx context.Context, it orchestrator.TransferIssue) error {
	err := r.Store.IssueTransfer(ctx, it)
	if err == nil {
		r.wrote(it.Transfer.State)
	}
	return err
}

func (r *recordingStore) CreateTransfer(ctx context.Context, t *orchestrator.Transfer) error {
	err := r.Store.CreateTransfer(ctx, t)
	if err == nil {
		r.wrote(t.State)
	}
	return err
}

func (r *recordingStore) CommitCritical(ctx context.Context, c orchestrator.CriticalCommit) (record.CriticalAck, error) {
	ack, err := r.Store.CommitCritical(ctx, c)
	if err == nil {
		r.wrote()
	}
	return ack, err
}

func (r *recordingStore) SetLease(ctx context.Context, l orchestrator.Lease, prevEpoch int64) error {
	err := r.Store.SetLease(ctx, l, prevEpoch)
	if err == nil {
		r.wrote()
	}
	return err
}

func (r *recordingStore) transactions() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes
}

func (r *recordingStore) AdvanceTransfer(ctx context.Context, id string, from []orchestrator.TransferState, to orchestrator.TransferState, reason string) (*orchestrator.Transfer, error) {
	tr, err := r.Store.AdvanceTransfer(ctx, id, from, to, reason)
	if err == nil {
		r.wrote(to)
	}
	return tr, err
}

func (r *recordingStore) Admit(ctx context.Context, a orchestrator.Admission) (bool, error) {
	superseded, err := r.Store.Admit(ctx, a)
	if err == nil {
		r.mu.Lock()
		if superseded {
			r.states = append(r.states, orchestrator.TransferAborted)
		}
		if a.Accept != "" {
			r.states = append(r.states, orchestrator.TransferDestinationAccepted)
		}
		r.mu.Unlock()
	}
	return superseded, err
}

func (r *recordingStore) recorded() []orchestrator.TransferState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.states)
}

// TestTransfer_StatesWhenTheyHappen pins when each state is written: the request
// records the transfer at token_issued (the source released with it) in one write
// transaction, the transfer is accepted at the redeem and completed only when the
// destination reports.
func TestTransfer_StatesWhenTheyHappen(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	r := enter(t, e, authKey)
	rec := &recordingStore{Store: e.db}
	e.svc.Store = rec

	want := []orchestrator.TransferState{orchestrator.TransferTokenIssued}
	a, err := e.svc.RequestTransfer(ctx, transferReq("tr-s", r, "default-1", "frontier", 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.recorded(); !slices.Equal(got, want) {
		t.Fatalf("after the request: %v, want %v", got, want)
	}
	if n := rec.transactions(); n != 1 {
		t.Fatalf("the request made %d write transactions, want 1", n)
	}
	e.redeem(t, "frontier-1", a.Token)
	want = append(want, orchestrator.TransferDestinationAccepted)
	if got := rec.recorded(); !slices.Equal(got, want) {
		t.Fatalf("after the redeem: %v, want %v", got, want)
	}
	if err := e.svc.TransferResult(ctx, mapcontract.TransferResult{TransferID: "tr-s", InstanceID: "frontier-1", Success: true}); err != nil {
		t.Fatal(err)
	}
	want = append(want, orchestrator.TransferCompleted)
	if got := rec.recorded(); !slices.Equal(got, want) {
		t.Fatalf("after the report: %v, want %v", got, want)
	}
}

// TestService_OpenSweeps checks that an opened service aborts an expired transfer on
// its own, and that Close stops the sweeper.
func TestService_OpenSweeps(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.svc.SweepInterval = 5 * time.Millisecond
	r := enter(t, e, authKey)
	if _, err := e.svc.RequestTransfer(ctx, transferReq("tr-e", r, "default-1", "frontier", 1)); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Open(); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Open(); err == nil {
		t.Error("a second Open succeeded")
	}
	e.clock.Add(e.svc.TransferTTL + time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		tr, err := e.db.Transfer(ctx, "tr-e")
		if err != nil {
			t.Fatal(err)
		}
		if tr.State == orchestrator.TransferAborted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("transfer still %s after 10 s of sweeping", tr.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := e.svc.Close(); err != nil {
		t.Fatal(err)
	}
}
