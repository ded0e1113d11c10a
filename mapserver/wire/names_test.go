package wire_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/wire"
)

func TestDecodeNamesQuery(t *testing.T) {
	t.Run("Ids", func(t *testing.T) {
		q, err := wire.DecodeNamesQuery([]byte(`{"ids":[12, 40]}`))
		if err != nil || len(q.IDs) != 2 || q.IDs[0] != 12 || q.IDs[1] != 40 {
			t.Fatalf("got %+v, %v", q, err)
		}
	})
	full := "[" + strings.TrimSuffix(strings.Repeat("1,", wire.MaxNamesPerQuery), ",") + "]"
	if _, err := wire.DecodeNamesQuery([]byte(`{"ids":` + full + `}`)); err != nil {
		t.Fatalf("%d ids refused: %v", wire.MaxNamesPerQuery, err)
	}
	for _, payload := range []string{``, `[]`, `null`, `{}`, `{"ids":[]}`, `{"ids":[-1]}`, `{"ids":["7"]}`,
		`{"ids":[1],"x":1}`, `{"ids":[1]} {}`, `{"ids":` + full[:len(full)-1] + `,1]}`} {
		_, err := wire.DecodeNamesQuery([]byte(payload))
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != wire.CodeBadPayload {
			t.Errorf("payload %.40s: %v, want bad_payload", payload, err)
		}
	}
}
