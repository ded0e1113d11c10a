package admission_test

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/admission"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// flakyStore fails the next few durable uses of a nonce (a redeem's Admit, a rejoin's
// UseNonce) as a store that is closing does, and then behaves.
type flakyStore struct {
	admission.Store
	fail atomic.Int32
}

var _ admission.Store = (*flakyStore)(nil)

func (f *flakyStore) Admit(ctx context.Context, a orchestrator.Admission) (bool, error) {
	if f.fail.Add(-1) >= 0 {
		return false, apierr.Errorf(apierr.EUNAVAILABLE, "store closing")
	}
	return f.Store.Admit(ctx, a)
}

func (f *flakyStore) UseNonce(ctx context.Context, nonce string, expiresAt time.Time) error {
	if f.fail.Add(-1) >= 0 {
		return apierr.Errorf(apierr.EUNAVAILABLE, "store closing")
	}
	return f.Store.UseNonce(ctx, nonce, expiresAt)
}

// TestNonce_SpentOnceAfterAFailedWrite: every credential's nonce is spent by one rule.
// A write that failed wrote nothing, so the credential still works once; a replay of a
// used one is refused, whether this process or only the store remembers it.
func TestNonce_SpentOnceAfterAFailedWrite(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	f := &flakyStore{Store: e.db}
	e.svc = admission.NewService(testutil.Root(t, secret), f, e.maps, "default-1", slog.New(slog.NewTextHandler(io.Discard, nil)))
	e.svc.Now = e.clock.Now
	j := e.join(t, "")

	redeem := func() error {
		_, err := e.svc.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: "default-1", Token: j.Ticket})
		return err
	}
	rejoin := func() error {
		_, err := e.svc.Join(ctx, public.JoinRequest{Rejoin: j.Rejoin})
		return err
	}
	for _, tc := range []struct {
		name string
		use  func() error
	}{{"Ticket", redeem}, {"Rejoin", rejoin}} {
		use := tc.use
		t.Run(tc.name, func(t *testing.T) {
			f.fail.Store(1)
			wantCode(t, use(), apierr.EUNAVAILABLE)
			if err := use(); err != nil {
				t.Fatalf("after a failed write: %v", err)
			}
			wantCode(t, use(), apierr.ETICKETUSED)
		})
	}
}
