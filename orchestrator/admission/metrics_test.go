package admission_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator/admission"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestMetrics walks joins, redeems and a transfer through the service and checks each
// lands in its series with its outcome, and that no label carries a key or an id.
func TestMetrics(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	e.svc.Metrics = admission.NewMetrics(reg)
	metric := func(name string, labels ...string) float64 { return testutil.Metric(t, reg, name, labels...) }

	r := enter(t, e, authKey)
	guest := e.join(t, "")
	_, err := e.svc.Join(ctx, public.JoinRequest{AuthKey: "short"})
	wantCode(t, err, apierr.EBADREQUEST)
	_, err = e.svc.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: "default-1", Token: guest.Ticket})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: "default-1", Token: guest.Ticket})
	wantCode(t, err, apierr.ETICKETUSED)
	_, err = e.svc.Redeem(ctx, mapcontract.RedeemRequest{InstanceID: "default-1", Token: "forged"})
	wantCode(t, err, apierr.ETICKETINVALID)

	a, err := e.svc.RequestTransfer(ctx, transferReq("tr-1", r, "default-1", "frontier", 3))
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.RequestTransfer(ctx, transferReq("tr-2", r, "default-1", "cave", 3))
	wantCode(t, err, apierr.EFORBIDDEN)
	e.redeem(t, "frontier-1", a.Token)
	e.clock.Add(30 * time.Millisecond)
	if err := e.svc.TransferResult(ctx, mapcontract.TransferResult{TransferID: "tr-1", InstanceID: "frontier-1", Success: true}); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"mapyard_joins_total", []string{"identity", "key", "outcome", "ok"}, 1},
		{"mapyard_joins_total", []string{"identity", "guest", "outcome", "ok"}, 1},
		{"mapyard_joins_total", []string{"identity", "key", "outcome", apierr.EBADREQUEST}, 1},
		{"mapyard_join_duration_seconds", nil, 3},
		{"mapyard_redeems_total", []string{"kind", "join", "outcome", "ok"}, 2},
		{"mapyard_redeems_total", []string{"kind", "join", "outcome", apierr.ETICKETUSED}, 1},
		{"mapyard_redeems_total", []string{"kind", "unknown", "outcome", apierr.ETICKETINVALID}, 1},
		{"mapyard_redeems_total", []string{"kind", "transfer", "outcome", "ok"}, 1},
		{"mapyard_redeem_duration_seconds", nil, 5},
		{"mapyard_transfer_requests_total", []string{"outcome", "ok"}, 1},
		{"mapyard_transfer_requests_total", []string{"outcome", apierr.EFORBIDDEN}, 1},
		{"mapyard_transfer_request_duration_seconds", nil, 2},
		{"mapyard_transfers_total", []string{"outcome", "completed"}, 1},
		{"mapyard_transfer_duration_seconds", nil, 1},
	} {
		if got := metric(c.name, c.labels...); got != c.want {
			t.Errorf("%s%q=%v, want %v", c.name, c.labels, got, c.want)
		}
	}

	t.Run("TransferEnds", func(t *testing.T) {
		r2 := enter(t, e, "Kp2v9LrT0pXw2YbN5cHs8KdB")
		failed, err := e.svc.RequestTransfer(ctx, transferReq("tr-3", r2, "default-1", "cave", 1))
		if err != nil {
			t.Fatal(err)
		}
		e.redeem(t, "cave-1", failed.Token)
		if err := e.svc.TransferResult(ctx, mapcontract.TransferResult{TransferID: "tr-3", InstanceID: "cave-1", Reason: "full"}); err != nil {
			t.Fatal(err)
		}
		r3 := enter(t, e, "Mp2v9LrT0pXw2YbN5cHs8KdC")
		if _, err := e.svc.RequestTransfer(ctx, transferReq("tr-4", r3, "default-1", "cave", 1)); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(time.Minute)
		if _, err := e.svc.Sweep(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
		for outcome, want := range map[string]float64{"destination_failed": 1, "expired": 1, "completed": 1} {
			if got := metric("mapyard_transfers_total", "outcome", outcome); got != want {
				t.Errorf("transfers %s=%v, want %v", outcome, got, want)
			}
		}
	})

	t.Run("NoSecretsInLabels", func(t *testing.T) {
		var out strings.Builder
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if _, err := expfmt.MetricFamilyToText(&out, mf); err != nil {
				t.Fatal(err)
			}
		}
		for _, never := range []string{authKey, r.CharacterID, guest.CharacterID, "tr-1", "default-1"} {
			if strings.Contains(out.String(), never) {
				t.Errorf("metrics carry %q", never)
			}
		}
	})
}
