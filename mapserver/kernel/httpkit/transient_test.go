package httpkit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
)

// TestTransient: no answer and a server's fault are worth a retry; a refusal, a 5xx
// that is an answer, and the caller's own cancel are not.
func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"NoAnswer", errors.New("POST http://orch/orch/redeem: connection refused"), true},
		{"Internal", apierr.Errorf(apierr.EINTERNAL, "boom"), true},
		{"Unavailable", apierr.Errorf(apierr.EUNAVAILABLE, "closing"), true},
		{"UnavailableWrapped", fmt.Errorf("push: %w", apierr.Errorf(apierr.EUNAVAILABLE, "closing")), true},
		{"StorageFull", apierr.Errorf(apierr.ESTORAGEFULL, "disk full"), true}, // works once space returns
		{"UnknownCode", &apierr.Error{Code: "from_a_newer_server"}, true},      // answered 500
		{"BadRequest", apierr.Errorf(apierr.EBADREQUEST, "no"), false},
		{"Conflict", apierr.Errorf(apierr.ECONFLICT, "no"), false},
		{"TooLarge", apierr.Errorf(apierr.ETOOLARGE, "no"), false},
		{"NotImplemented", apierr.Errorf(apierr.ENOTIMPLEMENTED, "no"), false},
		{"MapUnavailable", apierr.Errorf(apierr.EMAPUNAVAILABLE, "no"), false},
		{"MapQuarantined", apierr.Errorf(apierr.EMAPQUARANTINED, "no"), false},
		{"Capacity", apierr.Errorf(apierr.ECAPACITY, "no"), false},
		{"Canceled", fmt.Errorf("POST: %w", context.Canceled), false},
		{"DeadlineExceeded", context.DeadlineExceeded, false},
		{"Nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := httpkit.Transient(tc.err); got != tc.want {
				t.Fatalf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
