package mapcontract_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// flaky answers status with an error of code to the first `fail` calls, then 200 with body.
func flaky(t *testing.T, fail int32, status int, code, body string) (*httptest.Server, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= fail {
			w.WriteHeader(status)
			w.Write([]byte(`{"error":{"code":"` + code + `","message":"refused"}}`))
			return
		}
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func TestClient_Retry(t *testing.T) {
	ctx := context.Background()
	t.Run("IdempotentRetried", func(t *testing.T) {
		srv, calls := flaky(t, 2, http.StatusServiceUnavailable, apierr.EUNAVAILABLE, `{"eventId":"e1","seq":7}`)
		ack, err := mapcontract.NewClient(srv.URL, "s").PersistCritical(ctx, record.CriticalEvent{EventID: "e1"})
		if err != nil || ack.Seq != 7 {
			t.Fatalf("ack %+v err %v", ack, err)
		}
		if got := calls.Load(); got != 3 {
			t.Fatalf("calls=%d, want 3", got)
		}
	})
	t.Run("RedeemNeverRetried", func(t *testing.T) {
		srv, calls := flaky(t, 2, http.StatusServiceUnavailable, apierr.EUNAVAILABLE, `{}`)
		_, err := mapcontract.NewClient(srv.URL, "s").Redeem(ctx, mapcontract.RedeemRequest{})
		if apierr.Code(err) != apierr.EUNAVAILABLE {
			t.Fatalf("err %v", err)
		}
		if got := calls.Load(); got != 1 {
			t.Fatalf("calls=%d, want 1", got)
		}
	})
	t.Run("AnswerNotRetried", func(t *testing.T) {
		// A 503 map_quarantined is the orchestrator's answer to a transfer, not a
		// fault: the map acts on it at once.
		srv, calls := flaky(t, 5, http.StatusServiceUnavailable, apierr.EMAPQUARANTINED, `{}`)
		_, err := mapcontract.NewClient(srv.URL, "s").RequestTransfer(ctx, mapcontract.TransferRequest{})
		if apierr.Code(err) != apierr.EMAPQUARANTINED {
			t.Fatalf("err %v", err)
		}
		if got := calls.Load(); got != 1 {
			t.Fatalf("calls=%d, want 1", got)
		}
	})
	t.Run("ClientErrorNotRetried", func(t *testing.T) {
		srv, calls := flaky(t, 5, http.StatusBadRequest, apierr.EBADREQUEST, `{}`)
		_, err := mapcontract.NewClient(srv.URL, "s").RequestTransfer(ctx, mapcontract.TransferRequest{})
		if err == nil {
			t.Fatal("want error")
		}
		if got := calls.Load(); got != 1 {
			t.Fatalf("calls=%d, want 1", got)
		}
	})
}
