// Command probe is the lab's tool inside the overlay, in one static binary for a FROM
// scratch image (no image can be pulled). `probe serve ADDR` answers every GET with its
// host name (a container's is its short id); `probe get URL WITHIN` asks URL until it
// answers 200 or WITHIN has passed, prints the answer and exits 0, or exits 1 with the
// last error; `probe relay ADDR TARGET` copies every TCP connection it accepts on ADDR
// to TARGET (host:port, its name looked up for each connection), so that a test on the
// host reaches a listener that is on the overlay only.
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: probe serve ADDR | probe get URL WITHIN | probe relay ADDR TARGET")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		host, _ := os.Hostname()
		err := http.ListenAndServe(os.Args[2], http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, host)
		}))
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	case "relay":
		if len(os.Args) < 4 {
			fmt.Fprintln(os.Stderr, "usage: probe relay ADDR TARGET")
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, relay(os.Args[2], os.Args[3]))
		os.Exit(1)
	case "get":
		within := time.Minute
		if len(os.Args) > 3 {
			d, err := time.ParseDuration(os.Args[3])
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			within = d
		}
		if err := get(os.Args[2], within); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

// get asks url until it answers 200 and prints the body: the overlay's path to a task
// on another node may take a moment to be programmed after the task starts.
func get(url string, within time.Duration) error {
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(within)
	for {
		resp, err := c.Get(url)
		if err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && rerr == nil {
				fmt.Print(string(body))
				return nil
			}
			err = fmt.Errorf("GET %s: %s %v", url, resp.Status, rerr)
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// relay accepts on addr and copies each connection both ways to target.
func relay(addr, target string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			t, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return
			}
			defer t.Close()
			done := make(chan struct{}, 2)
			go func() { io.Copy(t, c); t.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
			go func() { io.Copy(c, t); c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
			<-done
			<-done
		}()
	}
}
