package edgelink

import (
	"strings"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	b := AppendHeader(nil, KindData, 0xDEADBEEF, 1234)
	if len(b) != HeaderSize {
		t.Fatalf("header is %d bytes, want %d", len(b), HeaderSize)
	}
	h, err := ParseHeader(b)
	if err != nil || h != (Header{Kind: KindData, Stream: 0xDEADBEEF, Len: 1234}) {
		t.Fatalf("ParseHeader = %+v, %v", h, err)
	}
	var p [HeaderSize]byte
	PutHeader(p[:], KindClose, 7, 0)
	if h, err := ParseHeader(p[:]); err != nil || h != (Header{Kind: KindClose, Stream: 7}) {
		t.Fatalf("PutHeader/ParseHeader = %+v, %v", h, err)
	}
}

func TestParseHeaderRefusesBadRecords(t *testing.T) {
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"unknown kind": {AppendHeader(nil, 9, 1, 0), "unknown record kind"},
		"kind zero":    {AppendHeader(nil, 0, 1, 0), "unknown record kind"},
		"stream zero":  {AppendHeader(nil, KindData, 0, 3), "stream 0"},
		"too large":    {AppendHeader(nil, KindData, 1, MaxPayload+1), "over the"},
	} {
		if _, err := ParseHeader(tc.b); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
	if _, err := ParseHeader(AppendHeader(nil, KindData, 1, MaxPayload)); err != nil {
		t.Errorf("a record of MaxPayload bytes: %v", err)
	}
}
