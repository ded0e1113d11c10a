package envconf_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/envconf"
)

type checkedConfig struct {
	TickHz int `env:"T_TICK_HZ" envDefault:"30" help:"ticks per second"`
}

func (c *checkedConfig) Validate() error {
	if c.TickHz < 1 {
		return errors.New("T_TICK_HZ: must be at least 1")
	}
	return nil
}

func TestCommand_Prepare(t *testing.T) {
	healthy := true
	cmd := envconf.Command{Name: "demo", Title: "demo v1", Note: "a note", Healthcheck: func() error {
		if !healthy {
			return errors.New("down")
		}
		return nil
	}}
	for _, tt := range []struct {
		name      string
		args, env []string
		code      int
		done      bool
		out, err  string
	}{
		{"Help", []string{"-h"}, nil, 0, true, "T_TICK_HZ", ""},
		{"Run", nil, nil, 0, false, "", ""},
		{"ErrParse", nil, []string{"T_TICK_HZ=x"}, 2, true, "", "T_TICK_HZ"},
		{"ErrValidate", nil, []string{"T_TICK_HZ=0"}, 2, true, "", "must be at least 1"},
		{"Healthy", []string{"healthcheck"}, nil, 0, true, "", ""},
		{"ErrUnknownCommand", []string{"serve"}, nil, 2, true, "", `unknown command "serve"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var cfg checkedConfig
			var out, errw bytes.Buffer
			code, done := cmd.Prepare(&cfg, tt.args, tt.env, &out, &errw)
			if code != tt.code || done != tt.done {
				t.Fatalf("Prepare()=(%d, %v), want (%d, %v); stderr %s", code, done, tt.code, tt.done, errw.String())
			}
			if !strings.Contains(out.String(), tt.out) || !strings.Contains(errw.String(), tt.err) {
				t.Fatalf("stdout %q stderr %q, want %q and %q", out.String(), errw.String(), tt.out, tt.err)
			}
		})
	}
	t.Run("Unhealthy", func(t *testing.T) {
		healthy = false
		var cfg checkedConfig
		if code, done := cmd.Prepare(&cfg, []string{"healthcheck"}, nil, &bytes.Buffer{}, &bytes.Buffer{}); code != 1 || !done {
			t.Fatalf("Prepare()=(%d, %v), want (1, true)", code, done)
		}
	})
}
