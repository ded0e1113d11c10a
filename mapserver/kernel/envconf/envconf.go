// Package envconf loads mapyard's configuration structs from the environment with
// caarlos0/env and prints their help. Both binaries use it so that every tunable is an
// environment variable with a default and a one-line description, and an invalid value
// is reported by the name of its variable, not of a Go struct field.
package envconf

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"

	"github.com/caarlos0/env/v10"
)

// Load parses environ (KEY=VALUE pairs, as from os.Environ) into cfg, a pointer to a
// struct whose fields carry `env`, `envDefault` and `help` tags. Variables that are
// absent take their defaults. The error names every offending variable.
func Load(cfg any, environ []string) error {
	vars := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	err := env.ParseWithOptions(cfg, env.Options{Environment: vars})
	if err == nil {
		return nil
	}
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return err
	}
	keys := fieldKeys(cfg)
	msgs := make([]string, 0, len(agg.Errors))
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			key := keys[pe.Name]
			msgs = append(msgs, fmt.Sprintf("%s=%q: invalid %s value: %v", key, vars[key], pe.Type, unwrapAll(pe.Err)))
			continue
		}
		msgs = append(msgs, e.Error())
	}
	return errors.New(strings.Join(msgs, "; "))
}

// Var is one environment variable of a configuration struct, as its tags declare it.
type Var struct {
	Name    string
	Default string // "" when it has none
	Help    string
}

// Vars lists the variables of cfg (a struct or a pointer to one) in field order: the
// one source of -h and of the generated docs/configuration.md.
func Vars(cfg any) []Var {
	t := reflect.TypeOf(cfg)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var vars []Var
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		if key == "" {
			continue
		}
		vars = append(vars, Var{Name: key, Default: f.Tag.Get("envDefault"), Help: f.Tag.Get("help")})
	}
	return vars
}

// Usage writes one line per variable of cfg: name, default and description.
func Usage(w io.Writer, cfg any) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tDESCRIPTION")
	for _, v := range Vars(cfg) {
		def := v.Default
		if def == "" {
			def = "(none)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", v.Name, def, v.Help)
	}
	tw.Flush()
}

// Markdown writes the variables of cfg as a Markdown table: name, default and meaning.
func Markdown(w io.Writer, cfg any) {
	fmt.Fprintln(w, "| variable | default | meaning |")
	fmt.Fprintln(w, "|---|---|---|")
	cell := strings.NewReplacer("|", `\|`, "\n", " ")
	for _, v := range Vars(cfg) {
		def := "(none)"
		if v.Default != "" {
			def = "`" + v.Default + "`"
		}
		fmt.Fprintf(w, "| `%s` | %s | %s |\n", v.Name, cell.Replace(def), cell.Replace(v.Help))
	}
}

// fieldKeys maps struct field names to their environment variable names.
func fieldKeys(cfg any) map[string]string {
	t := reflect.TypeOf(cfg)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	m := make(map[string]string, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		key, _, _ := strings.Cut(t.Field(i).Tag.Get("env"), ",")
		m[t.Field(i).Name] = key
	}
	return m
}

// unwrapAll returns the innermost cause, which for strconv errors is the short reason
// ("invalid syntax", "value out of range") rather than a repetition of the input.
func unwrapAll(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
