package assets

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"slices"
)

// Set is a verified asset set: its manifest and the bytes of every file it lists.
type Set struct {
	// Manifest is the set's parsed manifest.
	Manifest *Manifest
	// Raw is manifest.json as it lay in the directory.
	Raw []byte
	// Data holds each listed file's bytes by path; each matches its size and hash.
	Data map[string][]byte
}

// Load reads the set directory fsys (its root holds manifest.json) and verifies it:
// the manifest parses and is valid (Parse), and every file it lists is there, a regular
// file of the listed size, within MaxFileSize, with the listed SHA-256. A file it does
// not list is ignored. The error is an *Error naming the first problem.
//
// A host directory should be opened with os.OpenRoot(dir).FS(), so that no symbolic
// link inside it reaches outside.
func Load(fsys fs.FS) (*Set, error) {
	raw, err := readLimited(fsys, ManifestName, MaxManifestSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, refuse(ReasonManifestMissing, ManifestName, "is not there")
	case err != nil:
		var e *Error
		if errors.As(err, &e) {
			e.Reason = ReasonManifestInvalid
			return nil, e
		}
		return nil, refuse(ReasonManifestInvalid, ManifestName, "cannot be read: %v", err)
	}
	m, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	s := &Set{Manifest: m, Raw: raw, Data: make(map[string][]byte, len(m.Files))}
	for _, f := range m.Files {
		data, err := readLimited(fsys, f.Path, MaxFileSize)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, refuse(ReasonFileMissing, f.Path, "is listed but not there")
		case err != nil:
			var e *Error
			if errors.As(err, &e) {
				return nil, e
			}
			return nil, refuse(ReasonFileMissing, f.Path, "cannot be read: %v", err)
		}
		if int64(len(data)) != f.Size {
			return nil, refuse(ReasonSizeMismatch, f.Path, "is %d bytes, the manifest says %d", len(data), f.Size)
		}
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != f.SHA256 {
			return nil, refuse(ReasonHashMismatch, f.Path, "has sha256 %s, the manifest says %s", got, f.SHA256)
		}
		s.Data[f.Path] = data
	}
	return s, nil
}

// readLimited reads the regular file name, refusing one larger than limit before
// reading it whole.
func readLimited(fsys fs.FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, refuse(ReasonFileMissing, name, "is not a regular file")
	}
	if st.Size() > limit {
		return nil, refuse(ReasonFileTooLarge, name, "is %d bytes, more than the %d a file may have", st.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, refuse(ReasonFileTooLarge, name, "is more than the %d bytes a file may have", limit)
	}
	return data, nil
}

// sortedKeys returns m's keys in order, so that validation reports the same first
// problem every time.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
