package edge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/assets"
	"github.com/mapyard/mapyard/mapserver/kernel/assets/defaultset"
)

// URLs of asset sets. A file's URL is its SHA-256 (and its extension, for the content
// type), so it never changes meaning and is cached for a year as immutable; a set's
// manifest is at its id and version, revalidated at each load (an ETag answers 304).
const (
	// AssetSetsPath lists the sets the edge serves.
	AssetSetsPath = "/assets/sets"
	// AssetFilesPrefix is followed by a file's sha256 and extension.
	AssetFilesPrefix = "/assets/files/"
)

// ManifestURL is where the edge serves the manifest of the set ref.
func ManifestURL(ref assets.Ref) string {
	return AssetSetsPath + "/" + ref.ID + "/" + ref.Version + "/" + assets.ManifestName
}

// DefaultAssetPoll is how often the host's asset directory is looked at for changes.
const DefaultAssetPoll = 3 * time.Second

// BuiltinAssetSet is the source named in logs for the embedded default set.
const BuiltinAssetSet = "builtin"

// AssetStore is the asset sets the edge serves: the embedded default set
// (mapserver/kernel/assets/defaultset) and one set per subdirectory of Dir, a host's,
// each verified by assets.Load before it is served. Dir is looked at again every Poll;
// a subdirectory that changed is loaded again, and a set that is refused is logged with
// its reason, counted in mapyard_edge_asset_sets_refused_total{reason}, and not served:
// the version of that directory loaded before, if any, keeps serving. A host's set with
// the id and version of the built-in one replaces it.
type AssetStore struct {
	// Dir is the host's asset directory (EDGE_ASSET_DIR); empty: the built-in set only.
	Dir string
	// Poll is how often Dir is looked at; DefaultAssetPoll when zero.
	Poll time.Duration
	// Builtin is the embedded default set's directory (defaultset.FS unless a test
	// swaps it).
	Builtin fs.FS
	Log     *slog.Logger

	refused *prometheus.CounterVec
	served  prometheus.Gauge

	mu      sync.RWMutex
	builtin *servedSet
	dirs    map[string]*servedSet // by subdirectory name: the last good load
	marks   map[string]string     // by subdirectory name: the fingerprint last looked at
	sets    map[assets.Ref]*servedSet
	files   map[string]asset // by the name under AssetFilesPrefix

	cancel context.CancelFunc
	done   chan struct{}
}

// servedSet is a verified set ready to serve.
type servedSet struct {
	source   string // "builtin" or the subdirectory's name
	set      *assets.Set
	manifest asset // the manifest with each file's url
	etag     string
	files    map[string]asset
}

// NewAssetStore returns a store of the built-in set and dir's sets, registering its
// metrics on reg.
func NewAssetStore(dir string, poll time.Duration, log *slog.Logger, reg prometheus.Registerer) *AssetStore {
	s := &AssetStore{Dir: dir, Poll: poll, Builtin: defaultset.FS(), Log: log,
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mapyard_edge_asset_sets_refused_total",
			Help: "Asset sets refused at load, by reason (manifest_missing, manifest_invalid, bad_path, file_missing, file_too_large, size_mismatch, hash_mismatch, set_too_large, duplicate)."}, []string{"reason"}),
		served: prometheus.NewGauge(prometheus.GaugeOpts{Name: "mapyard_edge_asset_sets",
			Help: "Asset sets the edge serves, the built-in one included."}),
	}
	reg.MustRegister(s.refused, s.served)
	return s
}

// ReasonDuplicate refuses a host's set whose id and version another subdirectory
// already serves.
const ReasonDuplicate = "duplicate"

// Open loads the built-in set and Dir's sets, then looks at Dir every Poll until
// Close. A broken built-in set is an error (a build defect); a host's broken set is
// only refused.
func (s *AssetStore) Open() error {
	b, err := assets.Load(s.Builtin)
	if err != nil {
		return fmt.Errorf("built-in asset set: %w", err)
	}
	s.builtin = prepareSet(BuiltinAssetSet, b)
	s.dirs, s.marks = map[string]*servedSet{}, map[string]string{}
	s.Scan()
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	go func() {
		defer close(s.done)
		if s.Dir == "" {
			return
		}
		poll := s.Poll
		if poll <= 0 {
			poll = DefaultAssetPoll
		}
		t := time.NewTicker(poll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.Scan()
			}
		}
	}()
	return nil
}

// Close stops looking at Dir.
func (s *AssetStore) Close() {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
}

// Scan looks at Dir once: every subdirectory whose files changed since the last scan
// is loaded again (kept when it loads, refused and logged when not), a subdirectory
// that is gone stops being served. Open and the poll call it; tests call it to skip
// the wait.
func (s *AssetStore) Scan() {
	var names []string
	if s.Dir != "" {
		entries, err := os.ReadDir(s.Dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.Log.Warn("asset directory unreadable; serving the sets loaded before", "dir", s.Dir, "err", err)
			return
		}
		for _, e := range entries {
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
				names = append(names, e.Name())
			}
		}
	}
	changed := false
	for name := range s.dirs {
		if !slices.Contains(names, name) {
			s.Log.Info("asset set removed", "dir", name, "set", s.dirs[name].set.Manifest.Ref().String())
			delete(s.dirs, name)
			changed = true
		}
	}
	for name := range s.marks {
		if !slices.Contains(names, name) {
			delete(s.marks, name)
		}
	}
	for _, name := range names {
		full := filepath.Join(s.Dir, name)
		mark := fingerprint(full)
		if mark == s.marks[name] {
			continue
		}
		s.marks[name] = mark
		if set, err := loadDir(full); err != nil {
			s.refuse(name, err)
		} else {
			prev := s.dirs[name]
			s.dirs[name] = prepareSet(name, set)
			changed = true
			s.Log.Info("asset set loaded", "dir", name, "set", set.Manifest.Ref().String(), "files", len(set.Data), "replaces", prevRef(prev))
		}
	}
	if changed || s.sets == nil {
		s.rebuild()
	}
}

// refuse logs and counts a refused set.
func (s *AssetStore) refuse(dir string, err error) {
	reason := assets.ReasonManifestInvalid
	var e *assets.Error
	if errors.As(err, &e) {
		reason = e.Reason
	}
	s.refused.WithLabelValues(reason).Inc()
	keep := "none"
	if prev := s.dirs[dir]; prev != nil {
		keep = prev.set.Manifest.Ref().String()
	}
	s.Log.Warn("asset set refused; the version loaded before keeps serving", "dir", dir, "reason", reason, "err", err.Error(), "serving", keep)
}

func prevRef(p *servedSet) string {
	if p == nil {
		return "none"
	}
	return p.set.Manifest.Ref().String()
}

// rebuild recomputes what is served from the built-in set and the directories' last
// good loads, in directory name order.
func (s *AssetStore) rebuild() {
	sets := map[assets.Ref]*servedSet{s.builtin.set.Manifest.Ref(): s.builtin}
	names := make([]string, 0, len(s.dirs))
	for name := range s.dirs {
		names = append(names, name)
	}
	slices.Sort(names)
	fromDir := map[assets.Ref]string{}
	for _, name := range names {
		d := s.dirs[name]
		ref := d.set.Manifest.Ref()
		if other, dup := fromDir[ref]; dup {
			s.refused.WithLabelValues(ReasonDuplicate).Inc()
			s.Log.Warn("asset set refused: another directory serves the same id and version", "dir", name, "set", ref.String(), "served_from", other)
			continue
		}
		fromDir[ref] = name
		sets[ref] = d
	}
	files := map[string]asset{}
	for _, set := range sets {
		for k, a := range set.files {
			files[k] = a
		}
	}
	s.mu.Lock()
	s.sets, s.files = sets, files
	s.mu.Unlock()
	s.served.Set(float64(len(sets)))
}

// loadDir loads a host's set through an os.Root, so that no symbolic link in it reads
// outside it.
func loadDir(dir string) (*assets.Set, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, &assets.Error{Reason: assets.ReasonManifestMissing, Path: dir, Message: err.Error()}
	}
	defer root.Close()
	return assets.Load(root.FS())
}

// fingerprint sums the names, sizes and modification times of the files under dir:
// what changes when a host edits, adds or removes a file.
func fingerprint(dir string) string {
	h := sha256.New()
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			fmt.Fprintf(h, "%s\x00err\x00", p)
			return nil
		}
		if info, err := d.Info(); err == nil {
			fmt.Fprintf(h, "%s\x00%d\x00%d\x00", p, info.Size(), info.ModTime().UnixNano())
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))
}

// fileName is a file's name under AssetFilesPrefix: its hash and its extension.
func fileName(f assets.File) string { return f.SHA256 + strings.ToLower(path.Ext(f.Path)) }

// prepareSet compresses what pays and writes the served manifest: the set's own, with
// each file's url.
func prepareSet(source string, set *assets.Set) *servedSet {
	ss := &servedSet{source: source, set: set, files: map[string]asset{}}
	for _, f := range set.Manifest.Files {
		name := fileName(f)
		ctype := contentType(name)
		if strings.HasPrefix(ctype, "image/") && ctype != "image/svg+xml" {
			ss.files[name] = asset{ctype: ctype, plain: set.Data[f.Path]} // already compressed
		} else {
			ss.files[name] = compressed(ctype, set.Data[f.Path])
		}
	}
	var doc map[string]any
	_ = json.Unmarshal(set.Raw, &doc) // Load parsed it
	if files, ok := doc["files"].([]any); ok {
		for i, f := range files {
			if m, ok := f.(map[string]any); ok && i < len(set.Manifest.Files) {
				m["url"] = AssetFilesPrefix + fileName(set.Manifest.Files[i])
			}
		}
	}
	raw, _ := json.Marshal(doc)
	sum := sha256.Sum256(raw)
	ss.etag = `"` + hex.EncodeToString(sum[:16]) + `"`
	ss.manifest = compressed("application/json", raw)
	return ss
}

// Mount adds the asset routes to e.
func (s *AssetStore) Mount(e *echo.Echo) {
	e.GET(AssetSetsPath, s.handleList)
	e.GET(AssetSetsPath+"/:id/:version/"+assets.ManifestName, s.handleManifest)
	e.GET(AssetFilesPrefix+":name", s.handleFile)
}

// AssetSetInfo is one entry of the list of served sets.
type AssetSetInfo struct {
	ID       string `json:"id"`
	Version  string `json:"version"`
	Title    string `json:"title,omitempty"`
	Manifest string `json:"manifest"`
	Source   string `json:"source"`
}

func (s *AssetStore) handleList(c echo.Context) error {
	s.mu.RLock()
	out := make([]AssetSetInfo, 0, len(s.sets))
	for ref, set := range s.sets {
		out = append(out, AssetSetInfo{ID: ref.ID, Version: ref.Version, Title: set.set.Manifest.Title, Manifest: ManifestURL(ref), Source: set.source})
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b AssetSetInfo) int { return strings.Compare(a.ID+"@"+a.Version, b.ID+"@"+b.Version) })
	c.Response().Header().Set("Cache-Control", "no-cache")
	return c.JSON(http.StatusOK, map[string]any{"sets": out})
}

func (s *AssetStore) handleManifest(c echo.Context) error {
	ref := assets.Ref{ID: c.Param("id"), Version: c.Param("version")}
	s.mu.RLock()
	set := s.sets[ref]
	s.mu.RUnlock()
	if set == nil {
		return apierr.Errorf(apierr.ENOTFOUND, "no asset set %s on this edge", ref)
	}
	h := c.Response().Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", set.etag)
	if match := c.Request().Header.Get("If-None-Match"); match != "" && strings.Contains(match, set.etag) {
		c.Response().WriteHeader(http.StatusNotModified)
		return nil
	}
	set.manifest.serve(c.Response(), c.Request())
	return nil
}

func (s *AssetStore) handleFile(c echo.Context) error {
	name := c.Param("name")
	s.mu.RLock()
	a, ok := s.files[name]
	s.mu.RUnlock()
	if !ok {
		return apierr.Errorf(apierr.ENOTFOUND, "no asset file %s on this edge", name)
	}
	c.Response().Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	a.serve(c.Response(), c.Request())
	return nil
}

// Sets returns the id and version of every set served, sorted.
func (s *AssetStore) Sets() []assets.Ref {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]assets.Ref, 0, len(s.sets))
	for ref := range s.sets {
		out = append(out, ref)
	}
	slices.SortFunc(out, func(a, b assets.Ref) int { return strings.Compare(a.String(), b.String()) })
	return out
}
