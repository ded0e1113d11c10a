// Package rawio is raw, non-blocking socket I/O for the two hot paths that move game
// traffic: the map server's flusher (mapserver/ws), which hands a socket every frame of
// a tick in one writev and never waits for it, and the edge's splices and epoll engine
// (orchestrator/edge), which forward bytes between two sockets. Both read and write
// through the connection's own file descriptor instead of net.Conn: net.Conn tells the
// Go scheduler about every system call, and a loopback write can run long enough for
// the scheduler to hand the thread's processor to another thread, so a proxy or a
// flusher that wakes for every small message pays a thread switch per message. These
// calls never block, so the scheduler need not know.
//
// It is Linux only; elsewhere New answers nil and callers take net.Conn's path. It is
// in the kernel because both trees use it and neither may import the other.
package rawio
