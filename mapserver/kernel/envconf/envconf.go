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
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caarlos0/env/v10"
)

// Load parses environ (KEY=VALUE pairs, as from os.Environ) into cfg, a pointer to a
// struct whose fields carry `env`, `envDefault` and `help` tags; an embedded struct's
// fields count as the struct's own, so binaries that read the same variables share one
// struct and one set of tags. Variables that are absent take their defaults: a value
// already set in cfg (a preset), else the envDefault tag. A preset is how a binary
// reads another's variables with defaults of its own (bin/fakeorch's loopback
// addresses) without writing their names again. The error names every offending
// variable.
func Load(cfg any, environ []string) error {
	vars := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	for _, f := range fields(cfg) {
		if _, set := vars[f.name]; set {
			continue
		}
		if preset, ok, err := presetOf(f); err != nil {
			return err
		} else if ok {
			vars[f.name] = preset
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

// Ms converts a millisecond tunable to a time.Duration: every duration of mapyard's
// configuration is a whole number of milliseconds, named *_MS.
func Ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// Var is one environment variable of a configuration struct, as its tags declare it.
type Var struct {
	Name    string
	Default string // "" when it has none
	Help    string
}

// Vars lists the variables of cfg (a struct or a pointer to one) in field order, those
// of an embedded struct where it is embedded: the one source of -h and of the generated
// docs/configuration.md. A variable's default is cfg's preset value where it has one
// (see Load), else its envDefault tag.
func Vars(cfg any) []Var {
	var vars []Var
	for _, f := range fields(cfg) {
		def := f.tag.Get("envDefault")
		if preset, ok, _ := presetOf(f); ok {
			def = preset
		}
		vars = append(vars, Var{Name: f.name, Default: def, Help: f.tag.Get("help")})
	}
	return vars
}

// field is one variable's struct field, with its value in the configuration given.
type field struct {
	name  string // the variable
	field string // the Go field's name, as caarlos0/env reports it
	tag   reflect.StructTag
	value reflect.Value
}

// fields lists the fields of cfg that carry an env tag, depth first through embedded
// structs, in declaration order.
func fields(cfg any) []field {
	v := reflect.ValueOf(cfg)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	var out []field
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				if f.IsExported() { // caarlos0/env cannot set an unexported one
					walk(v.Field(i))
				}
				continue
			}
			if key, _, _ := strings.Cut(f.Tag.Get("env"), ","); key != "" {
				out = append(out, field{name: key, field: f.Name, tag: f.Tag, value: v.Field(i)})
			}
		}
	}
	walk(v)
	return out
}

// presetOf returns a field's preset value as its variable would spell it; ok is false
// for a zero value, which is no preset. Presets are strings, booleans and numbers.
func presetOf(f field) (preset string, ok bool, err error) {
	v := f.value
	if v.IsZero() {
		return "", false, nil
	}
	switch v.Kind() {
	case reflect.String:
		return v.String(), true, nil
	case reflect.Bool:
		return strconv.FormatBool(v.Bool()), true, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10), true, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10), true, nil
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64), true, nil
	}
	return "", false, fmt.Errorf("%s: a preset of a %s is not supported", f.name, v.Type())
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
	m := make(map[string]string)
	for _, f := range fields(cfg) {
		m[f.field] = f.name
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
