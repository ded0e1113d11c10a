package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/gorilla/websocket"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/kernel/public"
	"github.com/mapyard/mapyard/orchestrator"
	"github.com/mapyard/mapyard/orchestrator/docker"
	"github.com/mapyard/mapyard/orchestrator/docker/dockertest"
	"github.com/mapyard/mapyard/orchestrator/httpapi"
	"github.com/mapyard/mapyard/orchestrator/keys"
	"github.com/mapyard/mapyard/orchestrator/sqlite"
	"github.com/mapyard/mapyard/orchestrator/testutil"
)

// TestMain lets tests run the real orchestrator as a child process: the test binary
// re-executed with MAPYARD_ORCH_CHILD=1 behaves exactly like the orchestrator binary.
func TestMain(m *testing.M) {
	if os.Getenv("MAPYARD_ORCH_CHILD") == "1" {
		os.Exit(run(nil, os.Environ(), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestRun_Help(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"-h"}, nil, &out, io.Discard); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	for _, v := range []string{
		"ORCH_PUBLIC_ADDR", "ORCH_CONTROL_ADDR", "ORCH_DB_PATH", "ORCH_CHECKPOINT_MS",
		"ORCH_TRANSFER_TOKEN_TTL_MS", "ORCH_JOIN_TICKET_TTL_MS", "ORCH_HEARTBEAT_TIMEOUT_MS",
		"ORCH_MAP_RESTART_WINDOW_MS", "ORCH_MAP_RESTART_MAX_IN_WINDOW", "ORCH_MAP_QUARANTINE_MS",
		"ORCH_INTERNAL_RPC_SECRET", "ORCH_MAP_IMAGE", "ORCH_WARM_POOL_SIZE", "ORCH_MAP_IDLE_STOP_MS",
		"ORCH_DEPLOYMENT", "ORCH_ALLOW_FAULT_INJECTION", "MAP_FAULT_EXIT_AFTER_MS", "tests only",
		"ORCH_PREVIOUS_INTERNAL_RPC_SECRET", "ORCH_JOIN_RATE_PER_MIN", "ORCH_TRUSTED_PROXIES", "ORCH_MAX_GUESTS",
		"ORCH_MAX_CHARACTERS_PER_KEY", "ORCH_SESSION_IDLE_MS", "ORCH_SAVE_AUDIT_KEEP",
	} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("help does not list %s", v)
		}
	}
	if !strings.Contains(out.String(), "300000") {
		t.Error("help does not show defaults")
	}
}

func TestRun_EdgeSubcommand(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"edge", "-h"}, nil, &out, io.Discard); code != 0 || !strings.Contains(out.String(), "EDGE_PUBLIC_ADDR") {
		t.Fatalf("orchestrator edge -h: exit %d, %s", code, out.String())
	}
}

func TestRun_InvalidConfig(t *testing.T) {
	var stderr bytes.Buffer
	code := run(nil, []string{"ORCH_CHECKPOINT_MS=often"}, io.Discard, &stderr)
	if code == 0 {
		t.Fatal("exit code 0 for an invalid value")
	}
	if !strings.Contains(stderr.String(), "ORCH_CHECKPOINT_MS") {
		t.Fatalf("message does not name the variable: %s", stderr.String())
	}
}

// TestRun_BadMapTemplate: a host's map template that is no valid config stops the
// orchestrator at start, naming the file and the field, before it touches anything.
func TestRun_BadMapTemplate(t *testing.T) {
	dir := t.TempDir()
	arena := mapgen.Default()
	arena.MapID, arena.Bounds.Width = "arena", -5
	raw, err := json.Marshal(arena)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "arena.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	code := run(nil, []string{"ORCH_MAP_TEMPLATE_DIR=" + dir, "ORCH_DB_PATH=" + filepath.Join(t.TempDir(), "mapyard.db")}, io.Discard, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "arena.json") || !strings.Contains(stderr.String(), "bounds.width") {
		t.Fatalf("exit %d, %s; want a refusal naming the file and the field", code, stderr.String())
	}
}

// TestOrchestrator_DefaultMap runs the real orchestrator against the real Docker engine
// and checks the walking skeleton end to end: the default map container is created
// locked down, registers over the control RPC, the orchestrator becomes ready, the
// control listener refuses requests without the secret, and SIGTERM stops the
// orchestrator cleanly while the map keeps running.
func TestOrchestrator_DefaultMap(t *testing.T) {
	cli := dockertest.Client(t)
	ctx := context.Background()
	instance := "test-" + randomHex(t, 4)
	name := docker.ContainerName(instance, instance)
	t.Cleanup(func() { dockertest.RemoveDeployment(t, cli, instance) })

	secret := randomHex(t, 16)
	dbPath := filepath.Join(t.TempDir(), "mapyard.db")
	child := startOrchestrator(t, childEnv(instance, "127.0.0.1:0", dbPath, secret,
		"ORCH_DEFAULT_INSTANCE_ID="+instance,
		"MAP_HEARTBEAT_MS=500",
	))

	waitStatus(t, child.public+"/readyz", http.StatusOK, 60*time.Second)

	info, err := cli.ContainerInspect(ctx, name)
	if err != nil {
		t.Fatalf("default map container %s: %v", name, err)
	}
	t.Run("Labels", func(t *testing.T) {
		for k, want := range map[string]string{
			docker.LabelManaged: "true", docker.LabelInstance: instance, docker.LabelMap: "default",
		} {
			if got := info.Config.Labels[k]; got != want {
				t.Errorf("label %s=%q, want %q", k, got, want)
			}
		}
	})
	t.Run("PortsOnLoopbackOnly", func(t *testing.T) {
		if len(info.NetworkSettings.Ports) < 2 {
			t.Fatalf("published ports: %v", info.NetworkSettings.Ports)
		}
		for port, bindings := range info.NetworkSettings.Ports {
			if len(bindings) == 0 {
				t.Errorf("%s not published", port)
			}
			for _, b := range bindings {
				if b.HostIP != "127.0.0.1" {
					t.Errorf("%s bound on %q, want 127.0.0.1 only", port, b.HostIP)
				}
			}
		}
	})
	t.Run("LockedDown", func(t *testing.T) {
		if u := info.Config.User; u == "" || u == "0" || strings.HasPrefix(u, "0:") || u == "root" {
			t.Errorf("runs as user %q, want non-root", u)
		}
		if !info.HostConfig.ReadonlyRootfs {
			t.Error("root file system is writable")
		}
		if got := strings.Join(info.HostConfig.CapDrop, ","); got != "ALL" {
			t.Errorf("cap-drop %q, want ALL", got)
		}
		if got := info.HostConfig.RestartPolicy.Name; got != container.RestartPolicyDisabled {
			t.Errorf("restart policy %q, want no", got)
		}
		if !strings.Contains(strings.Join(info.HostConfig.SecurityOpt, ","), "no-new-privileges") {
			t.Errorf("security options %v lack no-new-privileges", info.HostConfig.SecurityOpt)
		}
	})
	t.Run("ReadyThroughControlRPC", func(t *testing.T) {
		var got struct{ Instances []orchestrator.Instance }
		testutil.GetJSON(t, child.control+httpapi.PathAdminMaps, secret, http.StatusOK, &got)
		if len(got.Instances) != 1 || got.Instances[0].ID != instance || got.Instances[0].State != orchestrator.StateReady {
			t.Fatalf("instances %+v, want %s ready", got.Instances, instance)
		}
		if got.Instances[0].ContainerID != info.ID {
			t.Fatalf("instance container %s, want %s", got.Instances[0].ContainerID, info.ID)
		}
	})
	// What the default map's container holds, recomputed from its labels as the
	// orchestrator does after a restart: the test speaks as that map below.
	mapCred, orchCred := credentialsOf(t, info, secret)
	t.Run("MapHoldsOnlyItsOwnCredentials", func(t *testing.T) {
		for _, kv := range info.Config.Env {
			if strings.Contains(kv, secret) || strings.HasPrefix(kv, "MAP_INTERNAL_RPC_SECRET=") {
				t.Errorf("map container env holds the root secret: %s", strings.SplitN(kv, "=", 2)[0])
			}
		}
		if !slices.Contains(info.Config.Env, mapcontract.EnvCredential+"="+mapCred) || !slices.Contains(info.Config.Env, mapcontract.EnvOrchCredential+"="+orchCred) {
			t.Errorf("map container env lacks its credentials")
		}
	})
	// The world the default map must run: the default template, generated here.
	cfg, err := mapgen.Resolve(instance, mapgen.DefaultMapID, nil)
	if err != nil {
		t.Fatal(err)
	}
	world, err := mapgen.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("WorldGeneratedFromMapConfig", func(t *testing.T) {
		// The map generated its world from the default template; the hash must be the
		// one this process computes with the same package (and the browser with wasm).
		var got struct{ Instances []orchestrator.Instance }
		testutil.GetJSON(t, child.control+httpapi.PathAdminMaps, secret, http.StatusOK, &got)
		url := fmt.Sprintf("http://127.0.0.1:%d", got.Instances[0].ControlPort)
		mc := mapcontract.NewMapClient(2 * time.Second)
		deadline := time.Now().Add(10 * time.Second)
		for {
			h, err := mc.Health(ctx, url, orchCred)
			if err == nil && h.WorldHash != "" {
				if h.WorldHash != world.Hash() {
					t.Fatalf("map world hash %s, want %s", h.WorldHash, world.Hash())
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("map never reported a world hash (last: %+v, %v)", h, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	t.Run("ErrUnauthorized", func(t *testing.T) {
		var e httpkit.ErrorResponse
		testutil.GetJSON(t, child.control+httpapi.PathAdminMaps, "", http.StatusUnauthorized, &e)
		if e.Error.Code != apierr.EUNAUTHORIZED {
			t.Fatalf("code %q, want %q", e.Error.Code, apierr.EUNAUTHORIZED)
		}
		testutil.GetJSON(t, child.control+httpapi.PathAdminMaps, secret+"x", http.StatusUnauthorized, &e)
		resp, err := http.Post(child.control+mapcontract.PathMapReady, "application/json",
			strings.NewReader(`{"instanceId":"`+instance+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("map-ready without secret: status %d, want 401", resp.StatusCode)
		}
	})

	t.Run("JoinAndRedeemOverHTTP", func(t *testing.T) {
		var j public.JoinResponse
		testutil.PostJSON(t, child.public+public.PathJoin, "", `{"authKey":"Zq3v9LrT0pXw2YbN5cHs8KdA","name":"ada"}`, http.StatusOK, &j)
		if j.InstanceID != instance || j.WS != public.WSPath(instance) || j.Ticket == "" || j.Disposable {
			t.Fatalf("join answer %+v", j)
		}
		body := `{"instanceId":"` + instance + `","token":"` + j.Ticket + `"}`
		var r mapcontract.RedeemResult
		testutil.PostJSON(t, child.control+mapcontract.PathRedeem, mapCred, body, http.StatusOK, &r)
		if r.CharacterID != j.CharacterID || r.Epoch != 1 {
			t.Fatalf("redeem answer %+v", r)
		}
		var e httpkit.ErrorResponse
		testutil.PostJSON(t, child.control+mapcontract.PathRedeem, mapCred, body, http.StatusConflict, &e)
		if e.Error.Code != apierr.ETICKETUSED {
			t.Fatalf("replay: code %q, want ticket_used", e.Error.Code)
		}
		testutil.PostJSON(t, child.public+public.PathJoin, "", `{"authKey":"short"}`, http.StatusBadRequest, &e)
		if e.Error.Code != apierr.EBADREQUEST || strings.Contains(e.Error.Message, "short") {
			t.Fatalf("bad key: %+v", e.Error)
		}
		testutil.PostJSON(t, child.public+public.PathJoin, "", `{"authKey":"Zq3v9LrT0pXw2YbN5cHs8KdA","extra":1}`, http.StatusBadRequest, &e)
		testutil.PostJSON(t, child.control+mapcontract.PathRedeem, "", body, http.StatusUnauthorized, &e)
	})

	// Players come through the edge, which learns routes from the control listener
	// (what a player sees there is TestSeed000_1 and _4's).
	edge := openEdge(t, child.control, child.edgeCredential)
	var transferID string
	t.Run("TransferBetweenMapsOverWebSocket", func(t *testing.T) {
		// A second map, then a saved character that enters the default map.
		dest := instance + "-f"
		testutil.PostJSON(t, child.control+httpapi.PathAdminMaps, secret, `{"instanceId":"`+dest+`","mapId":"frontier"}`, http.StatusCreated, nil)
		var j public.JoinResponse
		testutil.PostJSON(t, edge.PublicURL()+public.PathJoin, "", `{"authKey":"Tr4nsf3rK3yAbCdEfGhIjKlMn"}`, http.StatusOK, &j)
		base := "ws" + strings.TrimPrefix(edge.PublicURL(), "http")
		src := dialWS(t, base+j.WS)
		sendWS(t, src, `{"v":1,"kind":"hello","ticket":"`+j.Ticket+`"}`)
		var w struct {
			Kind, CharacterID, InstanceID, TransferID string
			Epoch                                     int64
		}
		readWS(t, src, &w)
		if w.Kind != "welcome" {
			t.Fatalf("source welcome %+v", w)
		}

		// The source map asks for the transfer (as its portal would), with the
		// character's final state; the orchestrator answers with the token.
		transferID = "tr-" + randomHex(t, 6)
		req := fmt.Sprintf(`{"transferId":%q,"characterId":%q,"fromInstanceId":%q,"toInstanceId":%q,"epoch":%d,`+
			`"state":{"mapId":"default","x":321.5,"y":42,"revision":7}}`, transferID, w.CharacterID, instance, dest, w.Epoch)
		var a mapcontract.TransferAnswer
		testutil.PostJSON(t, child.control+mapcontract.PathRequestTransfer, mapCred, req, http.StatusOK, &a)
		if a.ToInstanceID != dest || a.WS != public.WSPath(dest) {
			t.Fatalf("transfer answer %+v", a)
		}

		// The client reconnects to the destination through the edge with the token.
		dst := dialWS(t, base+a.WS)
		sendWS(t, dst, `{"v":1,"kind":"hello","ticket":"`+a.Token+`"}`)
		var w2 struct {
			Kind, CharacterID, InstanceID, TransferID string
			Epoch                                     int64
		}
		readWS(t, dst, &w2)
		if w2.Kind != "welcome" || w2.CharacterID != w.CharacterID || w2.InstanceID != dest || w2.TransferID != transferID || w2.Epoch <= w.Epoch {
			t.Fatalf("destination welcome %+v after %+v", w2, w)
		}
		// The source lost the character: a transfer request for it is refused, as one
		// for a character the map never held would be.
		var e httpkit.ErrorResponse
		testutil.PostJSON(t, child.control+mapcontract.PathRequestTransfer, mapCred,
			strings.Replace(req, transferID, transferID+"x", 1), http.StatusForbidden, &e)

		// The destination reports the arrival on its own; a retry of the request tells
		// the transfer's state without reaching into the orchestrator.
		deadline := time.Now().Add(10 * time.Second)
		for {
			req2, _ := http.NewRequest(http.MethodPost, child.control+mapcontract.PathRequestTransfer, strings.NewReader(req))
			req2.Header.Set(httpkit.SecretHeader, mapCred)
			resp, err := http.DefaultClient.Do(req2)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusConflict && strings.Contains(string(body), "is completed") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("transfer not completed: %d %s", resp.StatusCode, body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("SIGTERMLeavesMapsRunning", func(t *testing.T) {
		if err := child.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := child.wait(15 * time.Second); err != nil {
			t.Fatalf("orchestrator did not exit cleanly on SIGTERM: %v", err)
		}
		after, err := cli.ContainerInspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if !after.State.Running || after.ID != info.ID || after.RestartCount != 0 {
			t.Fatalf("map container after orchestrator stop: running=%v id=%s restarts=%d", after.State.Running, after.ID, after.RestartCount)
		}
		db := sqlite.NewDB(dbPath)
		if err := db.Open(); err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if mode, err := db.JournalMode(ctx); err != nil || mode != "wal" {
			t.Fatalf("journal mode %q (%v), want wal", mode, err)
		}
		// The destination reported the transfer, which the orchestrator completed.
		if transferID != "" {
			tr, err := db.Transfer(ctx, transferID)
			if err != nil || tr.State != orchestrator.TransferCompleted {
				t.Fatalf("transfer %+v (%v), want completed", tr, err)
			}
		}
	})
}

// credentialsOf returns the credentials of the map container info, recomputed from its
// labels and the root secret.
func credentialsOf(t *testing.T, info container.InspectResponse, secret string) (mapCred, orchCred string) {
	t.Helper()
	root, err := keys.NewRoot(secret)
	if err != nil {
		t.Fatal(err)
	}
	id := keys.Identity{InstanceID: info.Config.Labels[docker.LabelInstance], Generation: info.Config.Labels[docker.LabelGeneration]}
	if mapCred, err = root.MapCredential(id); err != nil {
		t.Fatalf("container %s: %v", info.Name, err)
	}
	if orchCred, err = root.OrchCredential(id); err != nil {
		t.Fatal(err)
	}
	return mapCred, orchCred
}

func dialWS(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func sendWS(t *testing.T, c *websocket.Conn, msg string) {
	t.Helper()
	if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// readWS reads the next JSON message into out, skipping binary snapshot frames.
func readWS(t *testing.T, c *websocket.Conn, out any) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		typ, data, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if typ == websocket.BinaryMessage {
			continue
		}
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("decode %s: %v", data, err)
		}
		return
	}
}

type childOrchestrator struct {
	cmd             *exec.Cmd
	public, control string
	// edgeCredential is the file the orchestrator writes the edge's credential to.
	edgeCredential string
	done           chan error
	logs           lockedBuffer // everything it logged
}

// lockedBuffer is a buffer one goroutine writes while a test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (c *childOrchestrator) wait(d time.Duration) error {
	select {
	case err := <-c.done:
		return err
	case <-time.After(d):
		c.cmd.Process.Kill()
		return <-c.done
	}
}

// startOrchestrator runs the orchestrator as a child process with env and returns once
// it logged its listener URLs. Its log goes to the test log.
// childEnv is the environment every test orchestrator starts with: its public listener
// on a free loopback port, the control listener on controlAddr, a database at dbPath,
// the secret, the map image built from this checkout and the test's own deployment, so
// it never touches another test's containers. extra adds the test's own variables.
func childEnv(deployment, controlAddr, dbPath, secret string, extra ...string) []string {
	return append([]string{
		"ORCH_PUBLIC_ADDR=127.0.0.1:0",
		"ORCH_CONTROL_ADDR=" + controlAddr,
		"ORCH_DB_PATH=" + dbPath,
		"ORCH_INTERNAL_RPC_SECRET=" + secret,
		"ORCH_MAP_IMAGE=" + dockertest.MapImage(),
		"ORCH_DEPLOYMENT=" + deployment,
		"ORCH_EDGE_CREDENTIAL_FILE=" + filepath.Join(filepath.Dir(dbPath), "edge-credential"),
	}, extra...)
}

func startOrchestrator(t *testing.T, env []string) *childOrchestrator {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), append(env, "MAPYARD_ORCH_CHILD=1")...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &childOrchestrator{cmd: cmd, done: make(chan error, 1)}
	for _, kv := range env {
		if f, ok := strings.CutPrefix(kv, "ORCH_EDGE_CREDENTIAL_FILE="); ok {
			c.edgeCredential = f
		}
	}
	urls := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Logf("orchestrator: %s", sc.Text())
			c.logs.Write(append(sc.Bytes(), '\n'))
			var line struct{ Msg, Public, Control string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "orchestrator listening" {
				urls <- [2]string{line.Public, line.Control}
			}
		}
		c.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})
	select {
	case u := <-urls:
		c.public, c.control = u[0], u[1]
	case err := <-c.done:
		t.Fatalf("orchestrator exited before listening: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("orchestrator did not start listening")
	}
	return c
}

func waitStatus(t testing.TB, url string, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := 0
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if last = resp.StatusCode; last == want {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: status %d after %s, want %d", url, last, timeout, want)
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func TestMapEnv(t *testing.T) {
	env := strings.Join(mapEnv([]string{
		"MAP_TICK_HZ=20", "PATH=/bin", "MAP_FAULT_EXIT_AFTER_MS=10", "MAP_INSTANCE_ID=x", "MAP_POOL_ID=pool-x",
		"MAP_ORCH_URL=http://elsewhere", "MAP_INTERNAL_RPC_SECRET=leak", "MAP_CREDENTIAL=forged", "MAP_ORCH_CREDENTIAL=forged",
	}, "http://host.docker.internal:9000"), " ")
	for _, want := range []string{"MAP_TICK_HZ=20", "MAP_ORCH_URL=http://host.docker.internal:9000"} {
		if !strings.Contains(env, want) {
			t.Errorf("map env %q lacks %s", env, want)
		}
	}
	for _, never := range []string{"PATH=", "MAP_FAULT_", "MAP_INSTANCE_ID", "MAP_POOL_ID", "elsewhere", "leak", "SECRET", "forged"} {
		if strings.Contains(env, never) {
			t.Errorf("map env %q passes %s through", env, never)
		}
	}
}
