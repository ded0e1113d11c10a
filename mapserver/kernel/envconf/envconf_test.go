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

// SharedConfig is what two binaries read alike; each embeds it.
type SharedConfig struct {
	Addr   string `env:"T_ADDR" envDefault:":8080" help:"listen address"`
	TickHz int    `env:"T_TICK_HZ" envDefault:"30" help:"ticks per second"`
}

type embeddingConfig struct {
	SharedConfig
	Extra string `env:"T_EXTRA" envDefault:"x" help:"this binary's own"`
}

// TestEmbeddedAndPresets: an embedded struct's variables are the struct's own, in
// place; a preset value is the default of its variable, for Load and for -h, and the
// environment still wins over it.
func TestEmbeddedAndPresets(t *testing.T) {
	var names []string
	for _, v := range envconf.Vars(embeddingConfig{}) {
		names = append(names, v.Name)
	}
	if got, want := strings.Join(names, " "), "T_ADDR T_TICK_HZ T_EXTRA"; got != want {
		t.Fatalf("Vars = %s, want %s", got, want)
	}
	t.Run("Preset", func(t *testing.T) {
		c := embeddingConfig{SharedConfig: SharedConfig{Addr: "127.0.0.1:9", TickHz: 60}}
		if err := envconf.Load(&c, nil); err != nil {
			t.Fatal(err)
		}
		if c.Addr != "127.0.0.1:9" || c.TickHz != 60 || c.Extra != "x" {
			t.Fatalf("got %+v", c)
		}
		var buf bytes.Buffer
		envconf.Usage(&buf, &embeddingConfig{SharedConfig: SharedConfig{Addr: "127.0.0.1:9"}})
		if out := buf.String(); !strings.Contains(out, "127.0.0.1:9") || strings.Contains(out, ":8080") {
			t.Fatalf("usage does not show the preset as the default:\n%s", out)
		}
	})
	t.Run("EnvironmentWins", func(t *testing.T) {
		c := embeddingConfig{SharedConfig: SharedConfig{Addr: "127.0.0.1:9"}}
		if err := envconf.Load(&c, []string{"T_ADDR=:1"}); err != nil || c.Addr != ":1" {
			t.Fatalf("Addr=%q err=%v, want :1", c.Addr, err)
		}
	})
	t.Run("ErrNamesEmbeddedVariable", func(t *testing.T) {
		var c embeddingConfig
		if err := envconf.Load(&c, []string{"T_TICK_HZ=fast"}); err == nil || !strings.Contains(err.Error(), "T_TICK_HZ") {
			t.Fatalf("error does not name the variable: %v", err)
		}
	})
}
