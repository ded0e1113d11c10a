// Package handover passes listening sockets from the process that serves them to the
// process that replaces it, over a unix socket, so that the replacement serves the very
// same sockets: a connection attempt waiting in their accept queue, or arriving during
// the swap, is accepted by one process or the other and never refused. Unlike a parent
// passing descriptors to the child it starts (cloudflare/tableflip, systemd socket
// activation), the two processes need not be related: two containers that share the
// directory of the unix socket will do.
//
// The owner of the sockets listens on the unix socket (Listen) and answers there
// (Server.Serve). A successor connects (Take), receives the sockets' descriptors
// (SCM_RIGHTS) with an opaque state, starts serving them and says so (Takeover.Ready);
// the owner then stops accepting on them (the stop function given to Serve), answers,
// and Serve returns: the owner finishes what it still serves and exits. A successor
// that goes away before Ready leaves the owner as it was. Messages are JSON, one per
// packet of a SOCK_SEQPACKET socket, and only a process of the same user (or root) is
// answered.
package handover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Protocol is the version of the messages; an owner refuses a successor of another.
const Protocol = 1

// DefaultTimeout bounds each step of a handover: a successor's answer after it
// connected, and its Ready after it received the sockets.
const DefaultTimeout = 10 * time.Second

// MaxState bounds the state an owner passes on. It must fit one packet with the
// message around it; an owner with a larger state passes none (the successor then
// starts from nothing, as after a fresh start) and says so in its log.
const MaxState = 96 << 10

// maxPacket is the receive buffer for one message: the state (JSON, passed as it is)
// and the message around it.
const maxPacket = MaxState + 4096

// maxFiles bounds the descriptors one offer carries.
const maxFiles = 16

// ErrNoOwner is Take's error when no process answers at the path: nothing is there, or
// a socket file its process left behind. The caller binds its sockets itself.
var ErrNoOwner = errors.New("handover: no process answers")

// ErrClosed is Serve's error once the server was closed without a handover.
var ErrClosed = errors.New("handover: server closed")

// Message operations.
const (
	opTake   = "take"   // successor: asks for the sockets
	opOffer  = "offer"  // owner: the sockets (SCM_RIGHTS), their names and the state
	opRefuse = "refuse" // owner: no sockets for you, and why
	opReady  = "ready"  // successor: it serves the sockets
	opDone   = "done"   // owner: it stopped accepting on them
)

// message is every packet of the protocol.
type message struct {
	V       int             `json:"v"`
	Op      string          `json:"op"`
	Version string          `json:"version,omitempty"` // the sender's build, for logs
	Names   []string        `json:"names,omitempty"`   // offer: one per descriptor, in order
	State   json.RawMessage `json:"state,omitempty"`   // offer
	Reason  string          `json:"reason,omitempty"`  // refuse
}

// Listener is a socket the owner offers, by name. Its Listener must have a descriptor
// (File), as *net.TCPListener and *net.UnixListener do.
type Listener struct {
	Name     string
	Listener net.Listener
}

// Offer is what an owner hands over: its listeners and a state of at most MaxState
// bytes of JSON (nil: none).
type Offer struct {
	Listeners []Listener
	State     json.RawMessage
}

// Server is an owner's end: the unix socket where its successor asks for its sockets.
type Server struct {
	// Version names the owner's build to its successor, for its log.
	Version string
	// Timeout bounds each step of a handover; DefaultTimeout when zero.
	Timeout time.Duration
	// Log receives a line for each successor that did not take over; nil discards.
	Log *slog.Logger

	ln   *net.UnixListener
	path string
}

// Listen binds the unix socket at path. Whatever is there already (the socket of a
// process that has gone, or the one of the owner this process took over from) is
// replaced at once, with a rename, so a process that looks for an owner always finds
// a socket at path. The socket is readable and writable by its user only, and is
// never removed by Close: a successor may own the path by then.
func Listen(path string) (*Server, error) {
	tmp := path + ".new." + strconv.Itoa(os.Getpid())
	_ = os.Remove(tmp)
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: tmp, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("handover: listen %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("handover: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("handover: %w", err)
	}
	return &Server{ln: ln, path: path}, nil
}

// Path is the unix socket's path.
func (s *Server) Path() string { return s.path }

// Close stops answering successors; Serve then returns ErrClosed, unless a handover is
// under way, which goes on.
func (s *Server) Close() error { return s.ln.Close() }

// Serve answers successors, one at a time, until one takes over: then it returns nil.
// For each, it calls offer for the sockets to pass, sends them, waits for the
// successor's Ready and calls stop, which must stop accepting on the offered
// listeners before it returns (closing them here leaves them open in the successor:
// both hold the same sockets). A successor that fails or goes away before Ready
// changes nothing, and the next one is answered. After Close it returns ErrClosed.
func (s *Server) Serve(offer func() (Offer, error), stop func()) error {
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return ErrClosed
			}
			return fmt.Errorf("handover: accept: %w", err)
		}
		done, err := s.answer(c, offer, stop)
		c.Close()
		if done {
			return nil
		}
		if err != nil && s.Log != nil {
			s.Log.Warn("a process asked for the listeners and did not take them over", "err", err)
		}
	}
}

// answer runs one handover with the successor on c; true once the successor took
// over and stop returned.
func (s *Server) answer(c *net.UnixConn, offer func() (Offer, error), stop func()) (bool, error) {
	if err := checkPeer(c); err != nil {
		_ = send(c, message{Op: opRefuse, Reason: err.Error()}, nil)
		return false, err
	}
	timeout := s.timeout()
	_ = c.SetDeadline(time.Now().Add(timeout))
	m, _, err := receive(c, false)
	if err != nil {
		return false, err
	}
	if m.V != Protocol || m.Op != opTake {
		_ = send(c, message{Op: opRefuse, Reason: fmt.Sprintf("want protocol %d, op %q", Protocol, opTake)}, nil)
		return false, fmt.Errorf("handover: unexpected message v%d %q", m.V, m.Op)
	}
	o, err := offer()
	if err != nil {
		_ = send(c, message{Op: opRefuse, Reason: err.Error()}, nil)
		return false, err
	}
	files, names, err := listenerFiles(o.Listeners)
	if err != nil {
		_ = send(c, message{Op: opRefuse, Reason: err.Error()}, nil)
		return false, err
	}
	defer closeAll(files)
	state := o.State
	if len(state) > MaxState {
		if s.Log != nil {
			s.Log.Warn("handover: the state is too large to pass; the successor starts without it", "bytes", len(state), "max", MaxState)
		}
		state = nil
	}
	if err := send(c, message{Op: opOffer, Version: s.Version, Names: names, State: state}, files); err != nil {
		return false, err
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	if m, _, err = receive(c, false); err != nil {
		return false, fmt.Errorf("handover: the successor went away before it served: %w", err)
	}
	if m.Op != opReady {
		return false, fmt.Errorf("handover: the successor answered %q, not %q", m.Op, opReady)
	}
	stop()
	_ = c.SetDeadline(time.Now().Add(timeout))
	_ = send(c, message{Op: opDone}, nil)
	return true, nil
}

func (s *Server) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return DefaultTimeout
}

// listenerFiles returns a duplicate descriptor of each listener, and their names.
func listenerFiles(ls []Listener) ([]*os.File, []string, error) {
	if len(ls) > maxFiles {
		return nil, nil, fmt.Errorf("handover: %d listeners, at most %d", len(ls), maxFiles)
	}
	var files []*os.File
	var names []string
	for _, l := range ls {
		f, ok := l.Listener.(interface{ File() (*os.File, error) })
		if !ok {
			closeAll(files)
			return nil, nil, fmt.Errorf("handover: listener %q has no descriptor", l.Name)
		}
		file, err := f.File()
		if err != nil {
			closeAll(files)
			return nil, nil, fmt.Errorf("handover: listener %q: %w", l.Name, err)
		}
		files = append(files, file)
		names = append(names, l.Name)
	}
	return files, names, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// Takeover is a successor's end: the sockets it received, until it serves them and
// says so with Ready.
type Takeover struct {
	// Version is the owner's build, as it named it.
	Version string
	// State is what the owner passed on with its sockets (nil: nothing).
	State json.RawMessage

	conn      *net.UnixConn
	listeners map[string]net.Listener
}

// Take asks the owner answering at path for its sockets; version names this build to
// it. ErrNoOwner means no process answers there. ctx bounds the exchange.
func Take(ctx context.Context, path, version string) (*Takeover, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unixpacket", path)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w at %s", ErrNoOwner, path)
		}
		return nil, fmt.Errorf("handover: dial %s: %w", path, err)
	}
	c := conn.(*net.UnixConn)
	t, err := take(ctx, c, version)
	if err != nil {
		c.Close()
		return nil, err
	}
	return t, nil
}

func take(ctx context.Context, c *net.UnixConn, version string) (*Takeover, error) {
	if err := checkPeer(c); err != nil {
		return nil, err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(DefaultTimeout)
	}
	_ = c.SetDeadline(deadline)
	if err := send(c, message{Op: opTake, Version: version}, nil); err != nil {
		return nil, err
	}
	m, files, err := receive(c, true)
	if err != nil {
		return nil, fmt.Errorf("handover: no answer from the owner: %w", err)
	}
	if m.Op == opRefuse {
		closeAll(files)
		return nil, fmt.Errorf("handover: the owner refused: %s", m.Reason)
	}
	if m.Op != opOffer || len(files) != len(m.Names) {
		closeAll(files)
		return nil, fmt.Errorf("handover: unexpected answer %q with %d descriptors for %d names", m.Op, len(files), len(m.Names))
	}
	t := &Takeover{Version: m.Version, State: m.State, conn: c, listeners: map[string]net.Listener{}}
	for i, f := range files {
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			closeAll(files[i+1:])
			t.closeListeners()
			return nil, fmt.Errorf("handover: listener %q: %w", m.Names[i], err)
		}
		t.listeners[m.Names[i]] = ln
	}
	return t, nil
}

// Listener returns the listener the owner passed under name, once: the caller owns it
// from then on. Nil when the owner passed none by that name.
func (t *Takeover) Listener(name string) net.Listener {
	ln := t.listeners[name]
	delete(t.listeners, name)
	return ln
}

// Ready tells the owner that this process serves the sockets, and waits until the
// owner has stopped accepting on them. ctx bounds the wait. The takeover is over
// either way: Ready closes the connection to the owner.
func (t *Takeover) Ready(ctx context.Context) error {
	defer t.conn.Close()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(DefaultTimeout)
	}
	_ = t.conn.SetDeadline(deadline)
	if err := send(t.conn, message{Op: opReady}, nil); err != nil {
		return err
	}
	m, _, err := receive(t.conn, false)
	if err != nil {
		return fmt.Errorf("handover: the owner did not confirm: %w", err)
	}
	if m.Op != opDone {
		return fmt.Errorf("handover: the owner answered %q, not %q", m.Op, opDone)
	}
	return nil
}

// Close ends the takeover without Ready: the owner keeps serving as before. Listeners
// not taken with Listener are closed.
func (t *Takeover) Close() error {
	t.closeListeners()
	return t.conn.Close()
}

func (t *Takeover) closeListeners() {
	for name, ln := range t.listeners {
		ln.Close()
		delete(t.listeners, name)
	}
}

// send writes m as one packet, with files' descriptors when there are any.
func send(c *net.UnixConn, m message, files []*os.File) error {
	m.V = Protocol
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("handover: %w", err)
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = syscall.UnixRights(fds...)
	}
	if _, _, err := c.WriteMsgUnix(b, oob, nil); err != nil {
		return fmt.Errorf("handover: send %s: %w", m.Op, err)
	}
	return nil
}

// receive reads one packet; with rights, the descriptors it carries come back as
// files (close-on-exec: Go receives them so).
func receive(c *net.UnixConn, rights bool) (message, []*os.File, error) {
	buf := make([]byte, maxPacket)
	var oob []byte
	if rights {
		oob = make([]byte, syscall.CmsgSpace(4*maxFiles))
	}
	n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return message{}, nil, err
	}
	files, ferr := parseRights(oob[:oobn])
	switch {
	case ferr != nil:
		closeAll(files)
		return message{}, nil, ferr
	case flags&(syscall.MSG_TRUNC|syscall.MSG_CTRUNC) != 0:
		closeAll(files)
		return message{}, nil, errors.New("handover: message truncated")
	case n == 0:
		closeAll(files)
		return message{}, nil, errors.New("handover: connection closed")
	}
	var m message
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		closeAll(files)
		return message{}, nil, fmt.Errorf("handover: bad message: %w", err)
	}
	return m, files, nil
}

// parseRights returns the descriptors of SCM_RIGHTS control messages as files.
func parseRights(oob []byte) ([]*os.File, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("handover: control message: %w", err)
	}
	var files []*os.File
	for _, cm := range msgs {
		fds, err := syscall.ParseUnixRights(&cm)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "handover"))
		}
	}
	return files, nil
}
