package rawio_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/rawio"
)

// pair returns both ends of a loopback TCP connection.
func pair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	if a, err = net.Dial("tcp", ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	b = <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// TestConn: what Write and Writev send, Read receives; Writev never waits for a full
// socket but says how much it took; the peer's close reads as io.EOF; a connection
// without a descriptor has no raw path.
func TestConn(t *testing.T) {
	a, b := pair(t)
	w, r := rawio.New(a), rawio.New(b)
	if w == nil || r == nil {
		t.Fatal("a TCP connection has no raw path")
	}
	if _, err := w.Write([]byte("hello ")); err != nil {
		t.Fatal(err)
	}
	if n, err := w.Writev([][]byte{[]byte("wo"), nil, []byte("rld")}); n != 5 || err != nil {
		t.Fatalf("Writev = %d, %v", n, err)
	}
	got := make([]byte, 0, 11)
	buf := make([]byte, 64)
	for len(got) < 11 {
		n, err := r.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if string(got) != "hello world" {
		t.Fatalf("read %q", got)
	}

	t.Run("WritevShortWhenFull", func(t *testing.T) {
		chunk := bytes.Repeat([]byte{'x'}, 1<<20)
		total, short := 0, false
		for i := 0; i < 64 && !short; i++ { // nobody reads b: the buffers fill up
			n, err := w.Writev([][]byte{chunk})
			if err != nil {
				t.Fatal(err)
			}
			total += n
			short = n < len(chunk)
		}
		if !short {
			t.Fatalf("64 MiB taken by a socket nobody reads")
		}
		if total == 0 {
			t.Fatal("nothing taken at all")
		}
	})
	t.Run("EOF", func(t *testing.T) {
		c, d := pair(t)
		c.Close()
		if _, err := rawio.New(d).Read(make([]byte, 8)); !errors.Is(err, io.EOF) {
			t.Fatalf("read after the peer closed: %v, want io.EOF", err)
		}
	})
	t.Run("NoDescriptor", func(t *testing.T) {
		p, q := net.Pipe()
		defer p.Close()
		defer q.Close()
		if rawio.New(p) != nil {
			t.Fatal("net.Pipe has a raw path")
		}
	})
}
