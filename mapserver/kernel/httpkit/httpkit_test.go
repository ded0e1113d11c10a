package httpkit_test

import (
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
)

// body is a request body with a string and a number field.
type body struct {
	InstanceID string `json:"instanceId"`
	GamePort   int    `json:"gamePort"`
}

func TestUnmarshal(t *testing.T) {
	var empty body
	if err := httpkit.Unmarshal([]byte(" \n"), &empty); err != nil || empty != (body{}) {
		t.Fatalf("empty body: %v %+v, want no fields", err, empty)
	}
	var v body
	if err := httpkit.Unmarshal([]byte(`{"instanceId":"a-1","gamePort":7000}`), &v); err != nil || v.InstanceID != "a-1" {
		t.Fatalf("valid body: %v %+v", err, v)
	}
	for name, in := range map[string]string{
		"ErrUnknownField": `{"instanceId":"a-1","extra":1}`,
		"ErrTrailingData": `{"instanceId":"a-1"} {}`,
		"ErrMalformed":    `{"instanceId":`,
		"ErrWrongType":    `{"gamePort":"x"}`,
	} {
		t.Run(name, func(t *testing.T) {
			err := httpkit.Unmarshal([]byte(in), &v)
			if got := apierr.Code(err); got != apierr.EBADREQUEST {
				t.Fatalf("code %q (%v), want bad_request", got, err)
			}
		})
	}
}
