package edge

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/public"
)

// TestFrameCursor: fed a map's frames cut at every place, the cursor stands at a
// boundary exactly after each whole frame and sees the close frame when it begins,
// whatever the lengths' forms (7-bit, 16-bit, 64-bit; masked or not).
func TestFrameCursor(t *testing.T) {
	frame := func(op byte, payload int, masked bool) []byte {
		b := []byte{0x80 | op, 0}
		switch {
		case payload < 126:
			b[1] = byte(payload)
		case payload <= 0xFFFF:
			b[1] = 126
			b = binary.BigEndian.AppendUint16(b, uint16(payload))
		default:
			b[1] = 127
			b = binary.BigEndian.AppendUint64(b, uint64(payload))
		}
		if masked {
			b[1] |= 0x80
			b = append(b, 1, 2, 3, 4)
		}
		return append(b, make([]byte, payload)...)
	}
	frames := [][]byte{
		frame(0x1, 5, false), frame(0x2, 0, false), frame(0x2, 300, false), frame(0x9, 3, true),
		frame(0x2, 70000, false), frame(0x1, 125, false), frame(0x2, 126, false),
	}
	var stream []byte
	var ends []int // offsets where a frame ends
	for _, f := range frames {
		stream = append(stream, f...)
		ends = append(ends, len(stream))
	}
	isEnd := map[int]bool{0: true}
	for _, e := range ends {
		isEnd[e] = true
	}
	for _, step := range []int{1, 2, 3, 7, 13, 14, 127, 4096, len(stream)} {
		t.Run(fmt.Sprintf("Step%d", step), func(t *testing.T) {
			var f frameCursor
			for at := 0; at < len(stream); {
				next := min(at+step, len(stream))
				f.feed(stream[at:next])
				at = next
				if got := f.atBoundary(); got != isEnd[at] {
					t.Fatalf("after %d bytes atBoundary() = %v, want %v", at, got, isEnd[at])
				}
			}
			if f.closed {
				t.Fatal("closed without a close frame")
			}
			cf := frame(0x8, 2, false)
			f.feed(cf[:1])
			if f.closed || f.atBoundary() {
				t.Fatalf("a close frame's first byte: closed %v, atBoundary %v", f.closed, f.atBoundary())
			}
			f.feed(cf[1:3])
			if !f.closed || f.atBoundary() {
				t.Fatalf("a close frame's header: closed %v, atBoundary %v", f.closed, f.atBoundary())
			}
			f.feed(cf[3:])
			if !f.atBoundary() {
				t.Fatal("not at a boundary after the close frame")
			}
		})
	}
}

// TestMapGoneClose: the edge's close frame is a whole, unmasked close frame with the
// code public.CloseMapGone, which the cursor reads as one.
func TestMapGoneClose(t *testing.T) {
	b := mapGoneClose
	if b[0] != 0x88 || int(b[1]) != len(b)-2 || b[1]&0x80 != 0 || b[1] > 125 {
		t.Fatalf("not one unmasked close frame: % x", b)
	}
	if code := binary.BigEndian.Uint16(b[2:4]); code != public.CloseMapGone {
		t.Fatalf("close code %d, want %d", code, public.CloseMapGone)
	}
	var f frameCursor
	f.feed(b)
	if !f.closed || !f.atBoundary() {
		t.Fatalf("cursor over it: closed %v, atBoundary %v", f.closed, f.atBoundary())
	}
}

// TestFrameCursor_Finish: finish consumes exactly the rest of the frame the cursor
// stands in, its header cut anywhere, and nothing at a boundary.
func TestFrameCursor_Finish(t *testing.T) {
	frame := append([]byte{0x81, 0x85, 1, 2, 3, 4}, "hello"...) // masked, 5 bytes
	next := []byte{0x81, 0x80, 0, 0, 0, 0}
	for cut := 1; cut < len(frame); cut++ {
		var f frameCursor
		f.feed(frame[:cut])
		rest := append(append([]byte(nil), frame[cut:]...), next...)
		if n := f.finish(rest); n != len(frame)-cut || !f.atBoundary() {
			t.Fatalf("cut at %d: finish took %d, want %d (at boundary %v)", cut, n, len(frame)-cut, f.atBoundary())
		}
	}
	var f frameCursor
	if n := f.finish(next); n != 0 {
		t.Fatalf("at a boundary finish took %d", n)
	}
}
