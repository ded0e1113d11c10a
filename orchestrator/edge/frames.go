package edge

import (
	"encoding/binary"

	"github.com/mapyard/mapyard/mapserver/kernel/public"
)

// mapGoneClose is the close frame the edge writes to a player whose map's side ended
// without the map's close frame (public.CloseMapGone): unmasked, as a server's frames
// are, with the reason "map gone".
var mapGoneClose = func() []byte {
	const reason = "map gone"
	b := []byte{0x88, byte(2 + len(reason))}
	b = binary.BigEndian.AppendUint16(b, public.CloseMapGone)
	return append(b, reason...)
}()

// maxFrameHeader is the longest WebSocket frame header: 2 bytes, an 8-byte extended
// length and a 4-byte masking key.
const maxFrameHeader = 14

// frameCursor follows the WebSocket frames a map sends to one player, as far as the
// edge has passed them on, by their headers alone: payloads are skipped, never read.
// It tells whether the stream stands between two frames, where a frame of the edge's
// own may go, and whether the map has begun its close frame. It costs a few
// comparisons per frame, and nothing per payload byte.
type frameCursor struct {
	head   [maxFrameHeader]byte // the current frame's header, while it is cut across reads
	hn     int                  // bytes of head held
	rest   uint64               // payload bytes of the current frame still to come
	closed bool                 // the map sent (the start of) its close frame
}

// feed moves the cursor over b, the map's next bytes to the player.
func (f *frameCursor) feed(b []byte) {
	for len(b) > 0 {
		if f.rest > 0 {
			if uint64(len(b)) <= f.rest {
				f.rest -= uint64(len(b))
				return
			}
			b = b[f.rest:]
			f.rest = 0
		}
		h, had := b, 0
		if f.hn > 0 {
			had = f.hn
			f.hn += copy(f.head[f.hn:], b)
			h = f.head[:f.hn]
		}
		n, payload := frameHeader(h)
		if n == 0 { // the header is cut: the rest comes with the next bytes
			if had == 0 {
				f.hn = copy(f.head[:], b)
			}
			return
		}
		if h[0]&0x0F == 0x8 {
			f.closed = true
		}
		b = b[n-had:]
		f.hn, f.rest = 0, payload
	}
}

// finish moves the cursor over the start of b that ends the frame it stands in, and
// returns how many bytes that is: all of b while the frame goes on past it.
func (f *frameCursor) finish(b []byte) int {
	n := 0
	for n < len(b) && f.hn > 0 {
		f.feed(b[n : n+1])
		n++
	}
	if f.hn > 0 {
		return n
	}
	take := min(uint64(len(b)-n), f.rest)
	f.rest -= take
	return n + int(take)
}

// atBoundary says the bytes passed on so far end with a whole frame.
func (f *frameCursor) atBoundary() bool { return f.hn == 0 && f.rest == 0 }

// frameHeader returns the length of the frame header at the start of b and the length
// of the frame's payload; n is 0 while b holds only part of the header.
func frameHeader(b []byte) (n int, payload uint64) {
	if len(b) < 2 {
		return 0, 0
	}
	n = 2
	switch l := b[1] & 0x7F; l {
	case 126:
		n += 2
	case 127:
		n += 8
	default:
		payload = uint64(l)
	}
	if b[1]&0x80 != 0 {
		n += 4 // masked: the map's frames are not, but a cursor reads whatever comes
	}
	if len(b) < n {
		return 0, 0
	}
	switch n - 2 - int(b[1]>>7)*4 {
	case 2:
		payload = uint64(binary.BigEndian.Uint16(b[2:4]))
	case 8:
		payload = binary.BigEndian.Uint64(b[2:10])
	}
	return n, payload
}
