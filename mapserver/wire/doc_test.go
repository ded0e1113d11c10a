package wire_test

import (
	"bufio"
	"encoding/hex"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/wire"
)

// docFrames returns the worked examples of the "Snapshot frames" section of
// docs/netcode.md: one frame per unlabelled fenced block, read from the leading
// hexadecimal tokens of each line (an even number of hex digits each, so "80fa01" is
// three bytes); the first other token starts the line's comment.
func docFrames(t *testing.T) [][]byte {
	t.Helper()
	f, err := os.Open("../../docs/netcode.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var frames [][]byte
	var frame []byte
	section, inBlock := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "### "):
			section = line == "### Snapshot frames"
		case !section:
		case line == "```":
			if inBlock {
				frames = append(frames, frame)
			}
			inBlock, frame = !inBlock, nil
		case inBlock:
			for _, tok := range strings.Fields(line) {
				b, err := hex.DecodeString(tok)
				if err != nil {
					break
				}
				frame = append(frame, b...)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return frames
}

// TestDocExamples: the doc's worked examples are byte for byte what the encoder
// writes for the situation the doc describes, and decode to that situation.
func TestDocExamples(t *testing.T) {
	enc, cl := wire.NewEncoder(0), wire.NewClient(0)
	player := wire.EntityState{ID: 12, Kind: 1, X: 16000, Y: 8000, Facing: 64}
	npc7 := wire.EntityState{ID: 7, Kind: 2, X: 100, Y: 50, Facing: 128, State: 1}
	npc13 := wire.EntityState{ID: 13, Kind: 2, X: 5, Y: 5}
	item := wire.EntityState{ID: 30, Kind: 3, X: 320, Y: 480, Template: 300}
	enc.Begin(300)
	enc.Set(3, player)
	enc.Set(5, npc7)
	enc.Set(9, npc13)
	enc.Set(10, item)
	full, _ := enc.Encode(nil, cl, 41, 3, []int32{3, 5, 9, 10})
	wantFull := []wire.Entity{{Slot: 3, EntityState: player}, {Slot: 5, EntityState: npc7}, {Slot: 9, EntityState: npc13}, {Slot: 10, EntityState: item}}

	// Tick 302: the player walked 5 quanta north; NPC 7 moved (-3, +2), turned to 96
	// and became alert; NPC 13 left the view; NPC 20 entered in slot 8; the item
	// became pending.
	cl.Ack(300)
	player.Y += 5
	npc7.X, npc7.Y, npc7.Facing, npc7.State = npc7.X-3, npc7.Y+2, 96, 2
	npc20 := wire.EntityState{ID: 20, Kind: 2, X: 200, Y: 60}
	item.State = 1
	enc.Begin(302)
	enc.Set(3, player)
	enc.Set(5, npc7)
	enc.Set(8, npc20)
	enc.Set(9, npc13)
	enc.Set(10, item)
	delta, isFull := enc.Encode(nil, cl, 43, 3, []int32{3, 5, 8, 10})
	if isFull {
		t.Fatal("the second example is not a delta")
	}
	wantDelta := []wire.Entity{{Slot: 3, EntityState: player}, {Slot: 5, EntityState: npc7}, {Slot: 8, EntityState: npc20}, {Slot: 10, EntityState: item}}

	doc := docFrames(t)
	if len(doc) != 2 {
		t.Fatalf("docs/netcode.md shows %d snapshot examples, want 2", len(doc))
	}
	dec := wire.NewDecoder(0)
	for i, ex := range []struct {
		frame []byte
		want  []wire.Entity
	}{{full, wantFull}, {delta, wantDelta}} {
		if !slices.Equal(doc[i], ex.frame) {
			t.Errorf("example %d: the doc shows\n% x\nthe encoder writes\n% x", i+1, doc[i], ex.frame)
		}
		snap, err := dec.Decode(doc[i])
		if err != nil {
			t.Fatalf("example %d: %v", i+1, err)
		}
		if !slices.Equal(snap.Entities, ex.want) || snap.Self != 3 {
			t.Errorf("example %d decodes to %+v, want %+v", i+1, snap.Entities, ex.want)
		}
	}
}

// TestDecodeRefusesOtherFormats: a frame of format 1 or of a later format, or naming a
// state field this format does not define, is refused with an error saying so, and the
// decoder still decodes the next good frame.
func TestDecodeRefusesOtherFormats(t *testing.T) {
	enc, cl := wire.NewEncoder(0), wire.NewClient(0)
	enc.Begin(2)
	enc.Set(0, wire.EntityState{ID: 1, Kind: 1, Facing: 9})
	good, _ := enc.Encode(nil, cl, 0, 0, []int32{0})
	cl.Ack(2)
	enc.Begin(4)
	enc.Set(0, wire.EntityState{ID: 1, Kind: 1, Facing: 10})
	next, _ := enc.Encode(nil, cl, 0, 0, []int32{0})

	for _, tc := range []struct {
		name  string
		frame []byte
		want  string
	}{
		// Format 1's full frame of one player at (0, 0): no field mask.
		{"ErrFormat1", []byte{0x02, 0x02, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x01, 0x00, 0x00, 0x00}, "unsupported snapshot format 1 (this decoder reads format 2)"},
		{"ErrFormat1Delta", []byte{0x03, 0x04, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00}, "unsupported snapshot format 1"},
		{"ErrFormat3", []byte{0x06, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00}, "unsupported snapshot format 3"},
		{"ErrFormat0", []byte{0x00}, "unsupported snapshot format 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := wire.NewDecoder(0).Decode(tc.frame)
			if !errors.Is(err, wire.ErrUnsupportedFormat) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrUnsupportedFormat saying %q", err, tc.want)
			}
		})
	}

	for _, tc := range []struct {
		name  string
		frame []byte
		want  string
	}{
		{"ErrSpawnUnknownField", []byte{0x04, 0x06, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x01, 0x00, 0x00, 0x08, 0x05, 0x00}, "unknown field mask bits 0x8"},
		{"ErrUpdateUnknownField", []byte{0x05, 0x06, 0x04, 0x00, 0x00, 0x00, 0x00, 0x01, 0x04, 0x11, 0x05}, "unknown field mask bits 0x10"},
		{"ErrUpdateEmptyFieldMask", []byte{0x05, 0x06, 0x04, 0x00, 0x00, 0x00, 0x00, 0x01, 0x04, 0x00}, "empty field mask"},
		{"ErrUpdateNothing", []byte{0x05, 0x06, 0x04, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00}, "nothing changed"},
		{"ErrTemplateRange", []byte{0x04, 0x06, 0x00, 0x00, 0x00, 0x01, 0x00, 0x03, 0x01, 0x00, 0x00, 0x04, 0x80, 0x80, 0x80, 0x80, 0x10, 0x00}, "template out of range"},
		{"ErrFacingTruncated", []byte{0x04, 0x06, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x01, 0x00, 0x00, 0x01}, "facing: truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dec := wire.NewDecoder(0)
			if _, err := dec.Decode(good); err != nil {
				t.Fatal(err)
			}
			if _, err := dec.Decode(tc.frame); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
			snap, err := dec.Decode(next)
			if err != nil || snap.Entities[0].Facing != 10 {
				t.Fatalf("the next good frame after a refused one: %+v, %v", snap, err)
			}
		})
	}
}
