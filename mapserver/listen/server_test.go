package listen_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/mapgen"
	"github.com/mapyard/mapyard/mapserver/listen"
)

const secret = "0123456789abcdef0123"

func MustOpenServer(tb testing.TB) *listen.Server {
	tb.Helper()
	s := listen.NewServer(secret, listen.Health{Status: "ok", InstanceID: "a-1", MapID: "default"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.GameAddr, s.ControlAddr = "127.0.0.1:0", "127.0.0.1:0"
	if err := s.Open(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func TestServer_Health(t *testing.T) {
	s := MustOpenServer(t)
	url := "http://127.0.0.1:" + strconv.Itoa(s.ControlPort()) + mapcontract.PathHealth
	get := func(sec string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if sec != "" {
			req.Header.Set(httpkit.SecretHeader, sec)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}
	t.Run("OK", func(t *testing.T) {
		resp, body := get(secret)
		var h listen.Health
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &h) != nil || h.InstanceID != "a-1" {
			t.Fatalf("status %d body %s", resp.StatusCode, body)
		}
	})
	for name, sec := range map[string]string{"ErrNoSecret": "", "ErrWrongSecret": secret[:19] + "x"} {
		t.Run(name, func(t *testing.T) {
			resp, body := get(sec)
			var e httpkit.ErrorResponse
			if resp.StatusCode != http.StatusUnauthorized || json.Unmarshal(body, &e) != nil || e.Error.Code != apierr.EUNAUTHORIZED {
				t.Fatalf("status %d body %s, want 401 unauthorized", resp.StatusCode, body)
			}
		})
	}
}

func TestServer_StartInstance(t *testing.T) {
	ctx := context.Background()
	mc := mapcontract.NewMapClient(2 * time.Second)
	open := func(t *testing.T, blank bool) (*listen.Server, string, *[]mapgen.MapConfig) {
		s := listen.NewServer(secret, listen.Health{Status: "ok", InstanceID: "frontier-9", MapID: "frontier"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		s.GameAddr, s.ControlAddr, s.Blank = "127.0.0.1:0", "127.0.0.1:0", blank
		var got []mapgen.MapConfig
		s.OnStart = func(r mapcontract.StartInstance, c mapgen.MapConfig) error {
			if c.Seed == 666 {
				return errors.New("this game does not run seed 666")
			}
			got = append(got, c)
			return nil
		}
		if err := s.Open(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(context.Background()) })
		return s, "http://127.0.0.1:" + strconv.Itoa(s.ControlPort()), &got
	}
	t.Run("BlankTakesInstance", func(t *testing.T) {
		s, url, got := open(t, true)
		cfg := mapgen.Default()
		cfg.InstanceID, cfg.Seed = "a-1", 1234
		raw, _ := json.Marshal(cfg)
		r := mapcontract.StartInstance{InstanceID: "a-1", MapID: "default", Config: raw}
		if err := mc.StartInstance(ctx, url, secret, r); err != nil {
			t.Fatal(err)
		}
		if h := s.Health(); h.InstanceID != "a-1" || h.MapID != "default" {
			t.Fatalf("health %+v after start-instance", h)
		}
		if err := mc.StartInstance(ctx, url, secret, r); err != nil {
			t.Fatalf("repeated start-instance: %v", err)
		}
		if len(*got) != 1 || (*got)[0].Seed != 1234 || (*got)[0].InstanceID != "a-1" {
			t.Fatalf("OnStart calls %+v, want exactly one with the config", *got)
		}
		err := mc.StartInstance(ctx, url, secret, mapcontract.StartInstance{InstanceID: "b-1", MapID: "frontier"})
		if code := apierr.Code(err); code != apierr.ECONFLICT {
			t.Fatalf("second instance: code %q (%v), want conflict", code, err)
		}
	})
	t.Run("ErrConflictNotBlank", func(t *testing.T) {
		_, url, _ := open(t, false)
		err := mc.StartInstance(ctx, url, secret, mapcontract.StartInstance{InstanceID: "a-1", MapID: "frontier"})
		if code := apierr.Code(err); code != apierr.ECONFLICT {
			t.Fatalf("code %q (%v), want conflict", code, err)
		}
		if err := mc.StartInstance(ctx, url, secret, mapcontract.StartInstance{InstanceID: "frontier-9", MapID: "frontier"}); err != nil {
			t.Fatalf("own instance: %v", err)
		}
	})
	t.Run("ErrBadRequest", func(t *testing.T) {
		_, url, _ := open(t, true)
		for name, r := range map[string]mapcontract.StartInstance{
			"BadID":      {InstanceID: "Bad Id", MapID: "frontier"},
			"UnknownMap": {InstanceID: "forest-1", MapID: "forest"},
			"BadConfig":  {InstanceID: "forest-1", MapID: "forest", Config: json.RawMessage(`{"mapId":"forest","instanceId":"forest-1","seed":7}`)},
		} {
			err := mc.StartInstance(ctx, url, secret, r)
			if code := apierr.Code(err); code != apierr.EBADREQUEST {
				t.Fatalf("%s: code %q (%v), want bad_request", name, code, err)
			}
		}
		// Refused configs leave the blank server free for a good one.
		if err := mc.StartInstance(ctx, url, secret, mapcontract.StartInstance{InstanceID: "frontier-2", MapID: "frontier"}); err != nil {
			t.Fatal(err)
		}
	})
	// A config the game cannot run is refused with the game's reason, and the server
	// stays free: it has no instance, and a good start after it is taken.
	t.Run("ErrMapConfigRefused", func(t *testing.T) {
		s, url, got := open(t, true)
		cfg := mapgen.Default()
		cfg.InstanceID, cfg.Seed = "a-1", 666
		raw, _ := json.Marshal(cfg)
		err := mc.StartInstance(ctx, url, secret, mapcontract.StartInstance{InstanceID: "a-1", MapID: "default", Config: raw})
		if apierr.Code(err) != apierr.EMAPCONFIGREFUSED || !strings.Contains(apierr.Message(err), "does not run seed 666") {
			t.Fatalf("refused config: %v, want map_config_refused with the game's reason", err)
		}
		if s.Started() != nil || s.Health().InstanceID == "a-1" {
			t.Fatalf("a refused start took the instance: %+v", s.Health())
		}
		if err := mc.StartInstance(ctx, url, secret, mapcontract.StartInstance{InstanceID: "frontier-2", MapID: "frontier"}); err != nil || len(*got) != 1 {
			t.Fatalf("a good start after a refused one: %v, %d starts", err, len(*got))
		}
	})
	t.Run("FaultFailHealth", func(t *testing.T) {
		s, url, _ := open(t, false)
		if h, err := mc.Health(ctx, url, secret); err != nil || h.InstanceID != "frontier-9" {
			t.Fatalf("health %+v, %v", h, err)
		}
		s.FailHealth = true
		if _, err := mc.Health(ctx, url, secret); apierr.Code(err) != apierr.EUNAVAILABLE {
			t.Fatalf("health with fault injected: %v, want unavailable", err)
		}
	})
}

func TestServer_Handoff(t *testing.T) {
	ctx := context.Background()
	mc := mapcontract.NewMapClient(2 * time.Second)
	r := mapcontract.Handoff{Generation: "g-2"}
	t.Run("ErrNotServed", func(t *testing.T) {
		url := "http://127.0.0.1:" + strconv.Itoa(MustOpenServer(t).ControlPort())
		if _, err := mc.Handoff(ctx, url, secret, r); apierr.Code(err) != apierr.ENOTFOUND {
			t.Fatalf("handoff without a hook: %v, want not_found", err)
		}
	})
	s := listen.NewServer(secret, listen.Health{Status: "ok", InstanceID: "a-1", MapID: "default"}, slog.New(slog.DiscardHandler))
	s.GameAddr, s.ControlAddr = "127.0.0.1:0", "127.0.0.1:0"
	var mu sync.Mutex
	var got []mapcontract.Handoff
	s.OnHandoff = func(_ context.Context, h mapcontract.Handoff) (mapcontract.HandoffAnswer, error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, h)
		return mapcontract.HandoffAnswer{Moved: 3, Transferred: 1, Remaining: 2}, nil
	}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	url := "http://127.0.0.1:" + strconv.Itoa(s.ControlPort())
	calls := func() []mapcontract.Handoff {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	t.Run("OK", func(t *testing.T) {
		a, err := mc.Handoff(ctx, url, secret, r)
		if err != nil || a != (mapcontract.HandoffAnswer{Moved: 3, Transferred: 1, Remaining: 2}) {
			t.Fatalf("answer %+v, %v", a, err)
		}
		if got := calls(); len(got) != 1 || got[0] != r {
			t.Fatalf("hook calls %+v", got)
		}
	})
	for name, sec := range map[string]string{"ErrNoSecret": "", "ErrWrongSecret": secret[:19] + "x"} {
		t.Run(name, func(t *testing.T) {
			if _, err := mc.Handoff(ctx, url, sec, r); apierr.Code(err) != apierr.EUNAUTHORIZED {
				t.Fatalf("got %v, want unauthorized", err)
			}
		})
	}
	t.Run("ErrBadRequest", func(t *testing.T) {
		for name, body := range map[string]string{
			"NoGeneration":    `{}`,
			"EmptyGeneration": `{"generation":""}`,
			"UnknownField":    `{"generation":"g-2","extra":1}`,
			"NotJSON":         `generation=g-2`,
		} {
			req, _ := http.NewRequest(http.MethodPost, url+mapcontract.PathHandoff, strings.NewReader(body))
			req.Header.Set(httpkit.SecretHeader, secret)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var e httpkit.ErrorResponse
			if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || e.Error.Code != apierr.EBADREQUEST {
				t.Fatalf("%s: status %d body %s, want 400 bad_request", name, resp.StatusCode, b)
			}
		}
		if got := calls(); len(got) != 1 {
			t.Fatalf("the hook was called for a bad request: %+v", got)
		}
	})
}
