package edge_test

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/orchestrator/edge"
)

func TestRun_Help(t *testing.T) {
	var out bytes.Buffer
	if code := edge.Run([]string{"-h"}, nil, &out, io.Discard); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	for _, v := range []string{
		"EDGE_PUBLIC_ADDR", "EDGE_METRICS_ADDR", "EDGE_ORCH_URL", "EDGE_CREDENTIAL_FILE", "EDGE_MAX_CONNS",
		"EDGE_IDLE_TIMEOUT_MS", "EDGE_DRAIN_TIMEOUT_MS", "EDGE_PROCS", "EDGE_STATIC_ROUTES", ":8080",
		"EDGE_HANDOVER_SOCKET", "EDGE_HANDOVER_SPREAD_MS", "EDGE_TLS_CERT_FILE", "EDGE_TLS_KEY_FILE", "EDGE_ACME_DOMAINS",
		"EDGE_ACME_EMAIL", "EDGE_ACME_DIRECTORY", "https://acme-v02.api.letsencrypt.org/directory", "EDGE_ACME_CACHE_DIR",
		"EDGE_HTTP_ADDR", "EDGE_HSTS_MAX_AGE_S", "EDGE_TRUSTED_PROXY_HEADER",
	} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("help does not list %s", v)
		}
	}
}

func TestRun_InvalidConfig(t *testing.T) {
	for _, env := range []string{
		"EDGE_MAX_CONNS=0", "EDGE_ORCH_URL=ftp://x", "EDGE_ENGINE=threads", "EDGE_STATIC_ROUTES=1=port", "EDGE_PUBLIC_ADDR=8080", "EDGE_HANDOVER_SPREAD_MS=-1",
		"EDGE_TLS_CERT_FILE=/certs/tls.crt", "EDGE_HTTP_ADDR=:80", "EDGE_ACME_DOMAINS=play.example.com", "EDGE_ACME_DOMAINS=192.0.2.1",
		"EDGE_TRUSTED_PROXY_HEADER=X-Real-IP", "EDGE_HSTS_MAX_AGE_S=-1",
	} {
		var stderr bytes.Buffer
		if code := edge.Run(nil, []string{env}, io.Discard, &stderr); code == 0 {
			t.Fatalf("%s: exit code 0", env)
		}
		name, _, _ := strings.Cut(env, "=")
		if !strings.Contains(stderr.String(), name) {
			t.Errorf("%s: message does not name the variable: %s", env, stderr.String())
		}
	}
}

// TestNew_EngineLoopAlias: EDGE_ENGINE=loop, the epoll engine's former name, still
// found in hosts' env files, runs the epoll engine and logs one deprecation warning.
func TestNew_EngineLoopAlias(t *testing.T) {
	for _, tt := range []struct {
		engine, want string
		warnings     int
	}{
		{"loop", edge.EngineEpoll, 1},
		{"epoll", edge.EngineEpoll, 0},
		{"goroutine", edge.EngineGoroutine, 0},
	} {
		t.Run(tt.engine, func(t *testing.T) {
			var logs bytes.Buffer
			cfg := edge.Config{PublicAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", OrchURL: "http://127.0.0.1:1",
				Credential: "x", MaxConns: 1, Procs: 1, IdleTimeoutMS: 1000, WriteTimeoutMS: 1000, LogLevel: "info", Engine: tt.engine}
			e, err := edge.New(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if got := e.Proxy.Engine; got != tt.want {
				t.Errorf("Proxy.Engine = %q, want %q", got, tt.want)
			}
			if got := strings.Count(logs.String(), "deprecated"); got != tt.warnings {
				t.Errorf("%d deprecation warnings, want %d; log:\n%s", got, tt.warnings, logs.String())
			}
			if tt.warnings > 0 && strings.Count(logs.String(), "\n") != 1 {
				t.Errorf("the warning is not one line:\n%s", logs.String())
			}
		})
	}
}
