package envconf_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mapyard/mapyard/mapserver/kernel/envconf"
)

type testConfig struct {
	Addr    string `env:"T_ADDR" envDefault:":8080" help:"listen address"`
	TickHz  int    `env:"T_TICK_HZ" envDefault:"30" help:"ticks per second"`
	Secret  string `env:"T_SECRET" help:"shared secret"`
	Ignored string
}

func TestLoad(t *testing.T) {
	t.Run("Defaults", func(t *testing.T) {
		var c testConfig
		if err := envconf.Load(&c, nil); err != nil {
			t.Fatal(err)
		}
		if got, want := c.Addr, ":8080"; got != want {
			t.Fatalf("Addr=%q, want %q", got, want)
		}
		if got, want := c.TickHz, 30; got != want {
			t.Fatalf("TickHz=%d, want %d", got, want)
		}
	})
	t.Run("Override", func(t *testing.T) {
		var c testConfig
		if err := envconf.Load(&c, []string{"T_TICK_HZ=60", "T_SECRET=a=b"}); err != nil {
			t.Fatal(err)
		}
		if c.TickHz != 60 || c.Secret != "a=b" {
			t.Fatalf("got %+v", c)
		}
	})
	t.Run("ErrNamesVariable", func(t *testing.T) {
		var c testConfig
		err := envconf.Load(&c, []string{"T_TICK_HZ=fast"})
		if err == nil {
			t.Fatal("expected error")
		}
		if msg := err.Error(); !strings.Contains(msg, "T_TICK_HZ") || !strings.Contains(msg, `"fast"`) {
			t.Fatalf("error does not name the variable and value: %s", msg)
		}
	})
}

func TestUsage(t *testing.T) {
	var buf bytes.Buffer
	envconf.Usage(&buf, &testConfig{})
	out := buf.String()
	for _, want := range []string{"T_ADDR", ":8080", "listen address", "T_TICK_HZ", "30", "T_SECRET", "(none)"} {
		if !strings.Contains(out, want) {
			t.Errorf("usage lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Ignored") {
		t.Errorf("usage lists a field without env tag:\n%s", out)
	}
}
