package edge

import (
	"net"
	"testing"
)

// TestListensOn: a listener handed over is kept only where the new edge's address
// would have bound it.
func TestListensOn(t *testing.T) {
	any4 := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	any6 := &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}
	lo := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9101}
	for _, tc := range []struct {
		addr net.Addr
		want string
		ok   bool
	}{
		{any6, ":8080", true},
		{any4, "0.0.0.0:8080", true},
		{any6, ":8081", false},
		{lo, "127.0.0.1:9101", true},
		{lo, "127.0.0.1:0", true},
		{lo, ":9101", false},
		{any6, "127.0.0.1:8080", false},
		{lo, "not an address", false},
	} {
		if got := listensOn(tc.addr, tc.want); got != tc.ok {
			t.Errorf("listensOn(%s, %q) = %v, want %v", tc.addr, tc.want, got, tc.ok)
		}
	}
}
