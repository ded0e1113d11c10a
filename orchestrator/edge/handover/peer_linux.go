//go:build linux

package handover

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// checkPeer refuses a process of another user than this one's (root excepted): the
// sockets passed are the host's public door.
func checkPeer(c *net.UnixConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("handover: %w", err)
	}
	var cred *syscall.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return fmt.Errorf("handover: %w", err)
	}
	if cerr != nil {
		return fmt.Errorf("handover: peer credentials: %w", cerr)
	}
	if uid := os.Geteuid(); int(cred.Uid) != uid && cred.Uid != 0 {
		return fmt.Errorf("handover: the peer runs as uid %d, not %d", cred.Uid, uid)
	}
	return nil
}
