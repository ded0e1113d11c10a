// Package schemas holds the JSON Schemas (draft 2020-12) of every message of the map
// contract (docs/map-contract.md: what a map serves, under control/, and what it calls,
// under orch/) and of the player protocol (docs/netcode.md, under player/), with the
// definitions they share under common/. The files are the documentation a map author
// in any language reads; this package embeds the very same files so that tests and
// tools validate real messages against them, and a schema that drifts from the wire
// fails a test instead of misleading an author.
//
// Each file's $id is BaseURI followed by its path here; references between files are
// relative, so a validator that loads the whole folder (or every file under its $id)
// resolves them without a network.
package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// BaseURI is the prefix of every schema's $id.
const BaseURI = "https://github.com/mapyard/mapyard/blob/main/docs/schemas/"

// Draft is the JSON Schema dialect every file declares in $schema.
const Draft = "https://json-schema.org/draft/2020-12/schema"

//go:embed common control orch player
var files embed.FS

// Names returns the path of every schema file, e.g. "orch/redeem.request.json", sorted.
func Names() []string {
	var names []string
	_ = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			names = append(names, p)
		}
		return nil
	})
	sort.Strings(names)
	return names
}

// ForRoute returns the schemas of a contract route's request body and of its 2xx
// answer's body: "/orch/redeem" gives "orch/redeem.request.json" and
// "orch/redeem.answer.json", "/control/start-instance" the control/ pair, and "/health"
// no request (a GET) and "control/health.answer.json". Every non-2xx answer, on any
// route, is "common/error.json". ok is false for a path that is not a contract route.
func ForRoute(route string) (request, answer string, ok bool) {
	switch {
	case route == "/health":
		return "", "control/health.answer.json", true
	case strings.HasPrefix(route, "/orch/"), strings.HasPrefix(route, "/control/"):
		dir, name := path.Split(strings.TrimPrefix(route, "/"))
		request, answer = dir+name+".request.json", dir+name+".answer.json"
		if _, err := fs.Stat(files, answer); err != nil {
			return "", "", false
		}
		return request, answer, true
	}
	return "", "", false
}

// ErrorAnswer is the schema of every non-2xx answer of the contract.
const ErrorAnswer = "common/error.json"

// Set is every schema compiled, by name.
type Set struct {
	compiled map[string]*jsonschema.Schema
	docs     map[string]map[string]any
}

// Load compiles every schema file. It fails when a file is not JSON, does not declare
// Draft, has an $id other than BaseURI plus its path, or does not compile (a broken
// reference included).
func Load() (*Set, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	s := &Set{compiled: map[string]*jsonschema.Schema{}, docs: map[string]map[string]any{}}
	for _, name := range Names() {
		data, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
		obj, _ := doc.(map[string]any)
		if obj == nil || obj["$schema"] != Draft || obj["$id"] != BaseURI+name {
			return nil, fmt.Errorf("schema %s: must be an object with $schema %q and $id %q", name, Draft, BaseURI+name)
		}
		if err := c.AddResource(BaseURI+name, doc); err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
		s.docs[name] = obj
	}
	for _, name := range Names() {
		sch, err := c.Compile(BaseURI + name)
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
		s.compiled[name] = sch
	}
	return s, nil
}

// Validate validates one JSON document against the schema name. The error names every
// place the document breaks the schema.
func (s *Set) Validate(name string, doc []byte) error {
	sch := s.compiled[name]
	if sch == nil {
		return fmt.Errorf("no schema %s", name)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("%s: not JSON: %w", name, err)
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// Required returns the properties the schema name requires at the top of a document,
// following a schema that is only a reference to another file; nil for a union
// (oneOf) of messages.
func (s *Set) Required(name string) []string {
	req, _ := s.resolve(name)["required"].([]any)
	out := make([]string, 0, len(req))
	for _, r := range req {
		out = append(out, fmt.Sprint(r))
	}
	return out
}

// Properties returns the top-level properties the schema name declares, following a
// schema that is only a reference to another file. Tests use it to catch a field that a
// real message carries and the schema forgot, where the schema allows unknown fields.
func (s *Set) Properties(name string) []string {
	props, _ := s.resolve(name)["properties"].(map[string]any)
	out := make([]string, 0, len(props))
	for p := range props {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// resolve returns the document of schema name, or of the file it only refers to
// ({"$ref": "other.json"}), followed to the end.
func (s *Set) resolve(name string) map[string]any {
	doc := s.docs[name]
	for doc != nil && doc["properties"] == nil && doc["required"] == nil {
		ref, _ := doc["$ref"].(string)
		if ref == "" || strings.Contains(ref, "#") {
			break
		}
		name = path.Join(path.Dir(name), ref)
		doc = s.docs[name]
	}
	return doc
}

// WithoutField returns doc (a JSON object) without its top-level field, for checking that a
// schema refuses a document missing a required field.
func WithoutField(doc []byte, field string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, err
	}
	delete(m, field)
	return json.Marshal(m)
}
