//go:build !linux

package edge

import "net"

// newRawIO has no fast path outside Linux: splices use net.Conn there.
func newRawIO(net.Conn) connIO { return nil }
