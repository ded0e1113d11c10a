//go:build ignore

// Command tls-handshakes measures how many full TLS handshakes a server completes per
// second and per core, for W2 over TLS (scripts/bench-w2.sh, TLS=1): C clients dial
// ADDR and complete a handshake with no session resumed, then close, as fast as they
// can for D after a warm-up. It prints one JSON line: handshakes per second, the
// server's CPU over the window (the processes given and their children, from
// /proc/<pid>/task/*/schedstat, as the wsproxy harness counts it), and handshakes per
// second of the server's CPU (per core).
//
// Usage: go run scripts/bench/tls-handshakes.go -addr 127.0.0.1:18085 -ca cert.pem -pids 1234 [-c 4] [-d 10s] [-curves x25519]
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18085", "the server")
	caFile := flag.String("ca", "", "PEM certificate the clients trust")
	name := flag.String("name", "", "server name to ask for (empty: none, the address is verified)")
	conns := flag.Int("c", 4, "clients handshaking at once")
	dur := flag.Duration("d", 10*time.Second, "measurement window")
	warm := flag.Duration("warmup", time.Second, "warm-up before the window")
	pids := flag.String("pids", "", "comma-separated PIDs whose CPU (children included) is the server's")
	curves := flag.String("curves", "", "key exchange the clients offer: empty for Go's defaults (X25519MLKEM768 first), or x25519")
	target := flag.String("target", "", "label")
	rep := flag.Int("rep", 0, "label")
	flag.Parse()

	pem, err := os.ReadFile(*caFile)
	if err != nil {
		fail(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		fail(fmt.Errorf("no certificate in %s", *caFile))
	}
	cfg := &tls.Config{RootCAs: roots, ServerName: *name, ClientSessionCache: nil}
	if cfg.ServerName == "" {
		host, _, _ := net.SplitHostPort(*addr)
		cfg.ServerName = host
	}
	switch *curves {
	case "":
	case "x25519":
		cfg.CurvePreferences = []tls.CurveID{tls.X25519}
	default:
		fail(fmt.Errorf("-curves %q: empty or x25519", *curves))
	}
	// A first handshake says what is negotiated, and that the server answers at all.
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", *addr, cfg)
	if err != nil {
		fail(err)
	}
	state := c.ConnectionState()
	c.Close()

	var counting atomic.Bool
	var done, errs atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := &net.Dialer{Timeout: 5 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := tls.DialWithDialer(d, "tcp", *addr, cfg)
				if !counting.Load() {
					if err == nil {
						c.Close()
					}
					continue
				}
				if err != nil {
					errs.Add(1)
					continue
				}
				c.Close()
				done.Add(1)
			}
		}()
	}
	time.Sleep(*warm)
	server0, self0 := treeCPU(*pids), treeCPU(strconv.Itoa(os.Getpid()))
	start := time.Now()
	counting.Store(true)
	time.Sleep(*dur)
	counting.Store(false)
	elapsed := time.Since(start)
	server, self := treeCPU(*pids)-server0, treeCPU(strconv.Itoa(os.Getpid()))-self0
	close(stop)
	wg.Wait()

	n := float64(done.Load())
	out := map[string]any{
		"target": *target, "rep": *rep, "curves": orDefault(*curves, "default"), "conns": *conns,
		"version": tls.VersionName(state.Version), "cipher": tls.CipherSuiteName(state.CipherSuite), "group": state.CurveID.String(),
		"handshakes": done.Load(), "errors": errs.Load(), "seconds": elapsed.Seconds(),
		"handshakes_per_s":  n / elapsed.Seconds(),
		"server_cpu_pct":    100 * server.Seconds() / elapsed.Seconds(),
		"client_cpu_pct":    100 * self.Seconds() / elapsed.Seconds(),
		"per_server_core_s": n / server.Seconds(),
		"server_cpu_us_per": float64(server.Microseconds()) / n,
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "tls-handshakes:", err)
	os.Exit(1)
}

// treeCPU is the CPU time the processes of pids and all their descendants have run.
func treeCPU(pids string) time.Duration {
	roots := map[int]bool{}
	for _, p := range strings.Split(pids, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(p)); err == nil {
			roots[n] = true
		}
	}
	parent := map[int]int{}
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		parent[pid], _ = strconv.Atoi(fields[1])
	}
	in := func(pid int) bool {
		for p := pid; p > 1; p = parent[p] {
			if roots[p] {
				return true
			}
		}
		return false
	}
	var total time.Duration
	for pid := range parent {
		if !in(pid) {
			continue
		}
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue
			}
			if f := strings.Fields(string(b)); len(f) > 0 {
				ns, _ := strconv.ParseInt(f[0], 10, 64)
				total += time.Duration(ns)
			}
		}
	}
	return total
}
