package record

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
)

// SnapshotSchemaVersion is the snapshot payload schema this orchestrator understands.
// Maps stamp it on every envelope; a store migrates older versions it knows how to
// upgrade and rejects every other version with apierr.ESCHEMAVERSION, so state is never
// silently reinterpreted under a schema it was not written for.
const SnapshotSchemaVersion = 1

// MaxSnapshotPayloadBytes is the default upper bound on one snapshot payload. A partition
// is one character or one slice of an instance, never a whole world, so anything larger
// is a bug on the map side and is refused with apierr.ETOOLARGE rather than stored.
const MaxSnapshotPayloadBytes = 1 << 20

// MaxCriticalPayloadBytes bounds the payload of one critical event for the same reason.
const MaxCriticalPayloadBytes = 64 << 10

// CharacterPartitionPrefix starts the partition name of a per-character snapshot
// ("character:<characterId>"). The store also projects such partitions into the
// character state table at checkpoints, so joins find where a character was saved.
const CharacterPartitionPrefix = "character:"

// SnapshotEnvelope wraps one snapshot partition pushed by a map server
// (POST /orch/persist-snapshot). It carries the version metadata that seed 001 requires
// so stored state can be checked and migrated instead of being trusted blindly.
type SnapshotEnvelope struct {
	// SchemaVersion is the version of the payload's schema (SnapshotSchemaVersion today).
	SchemaVersion int `json:"schemaVersion"`
	// SimCoreVersion names the simulation build that produced the payload.
	SimCoreVersion string `json:"simCoreVersion"`
	// PayloadHash is the lowercase hex SHA-256 of Payload's bytes exactly as sent.
	// Senders hash the compact JSON they embed (json.Marshal output is compact).
	PayloadHash string `json:"payloadHash"`
	// MapTick is the simulation tick the snapshot was taken at.
	MapTick int64 `json:"mapTick"`
	// ServerTimeMs is the map server's wall clock when the snapshot was taken.
	ServerTimeMs int64 `json:"serverTimeMs"`
	// Payload is the partition's state, a JSON object whose shape the schema defines.
	Payload json.RawMessage `json:"payload"`
}

// NewSnapshotEnvelope returns an envelope for payload at the current schema version with
// its hash filled in. Map servers and tests use it so the hash is always computed over
// the very bytes that are sent.
func NewSnapshotEnvelope(simCoreVersion string, mapTick, serverTimeMs int64, payload json.RawMessage) SnapshotEnvelope {
	return SnapshotEnvelope{
		SchemaVersion:  SnapshotSchemaVersion,
		SimCoreVersion: simCoreVersion,
		PayloadHash:    PayloadHash(payload),
		MapTick:        mapTick,
		ServerTimeMs:   serverTimeMs,
		Payload:        payload,
	}
}

// PayloadHash returns the lowercase hex SHA-256 of b, the checksum envelopes carry.
func PayloadHash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Validate checks the envelope without changing it: ValidatePayload, and the schema
// version must be SnapshotSchemaVersion. Stores that can migrate older versions call
// ValidatePayload and check the version themselves.
func (e *SnapshotEnvelope) Validate(maxBytes int) error {
	if err := e.ValidatePayload(maxBytes); err != nil {
		return err
	}
	if e.SchemaVersion != SnapshotSchemaVersion {
		return apierr.Errorf(apierr.ESCHEMAVERSION, "snapshot schema version %d is not supported (want %d)", e.SchemaVersion, SnapshotSchemaVersion)
	}
	return nil
}

// ValidatePayload checks everything but the schema version: the payload must be a JSON
// object no larger than maxBytes (MaxSnapshotPayloadBytes when maxBytes <= 0) whose
// SHA-256 matches PayloadHash, and simCoreVersion must be set. It returns an *Error with
// code apierr.ETOOLARGE, apierr.EINVALIDENVELOPE or apierr.EHASHMISMATCH.
func (e *SnapshotEnvelope) ValidatePayload(maxBytes int) error {
	if maxBytes <= 0 {
		maxBytes = MaxSnapshotPayloadBytes
	}
	if len(e.Payload) > maxBytes {
		return apierr.Errorf(apierr.ETOOLARGE, "snapshot payload is %d bytes, limit is %d", len(e.Payload), maxBytes)
	}
	if e.SimCoreVersion == "" {
		return apierr.Errorf(apierr.EINVALIDENVELOPE, "snapshot simCoreVersion required")
	}
	if len(e.PayloadHash) != sha256.Size*2 || strings.ToLower(e.PayloadHash) != e.PayloadHash {
		return apierr.Errorf(apierr.EINVALIDENVELOPE, "snapshot payloadHash must be %d lowercase hex characters", sha256.Size*2)
	}
	if got := PayloadHash(e.Payload); got != e.PayloadHash {
		return apierr.Errorf(apierr.EHASHMISMATCH, "snapshot payload hash mismatch")
	}
	if !isJSONObject(e.Payload) {
		return apierr.Errorf(apierr.EINVALIDENVELOPE, "snapshot payload must be a JSON object")
	}
	return nil
}

// SnapshotMigration upgrades a payload from one schema version to the next. It returns
// a new payload and never modifies its argument.
type SnapshotMigration func(payload json.RawMessage) (json.RawMessage, error)

// MigrateSnapshot upgrades e to schema version want by applying migrations[v] (v to v+1)
// in order. The result carries the new version and a recomputed hash, so the upgrade is
// visible in the stored metadata rather than a silent rewrite. A version newer than want,
// or one with no complete chain of migrations, fails with apierr.ESCHEMAVERSION; a migration
// that fails or yields something other than a JSON object fails with apierr.EINVALIDENVELOPE.
func MigrateSnapshot(e SnapshotEnvelope, want int, migrations map[int]SnapshotMigration) (SnapshotEnvelope, error) {
	if e.SchemaVersion > want {
		return e, apierr.Errorf(apierr.ESCHEMAVERSION, "snapshot schema version %d is newer than supported version %d", e.SchemaVersion, want)
	}
	for e.SchemaVersion < want {
		m := migrations[e.SchemaVersion]
		if m == nil {
			return e, apierr.Errorf(apierr.ESCHEMAVERSION, "snapshot schema version %d has no migration to version %d", e.SchemaVersion, want)
		}
		payload, err := m(e.Payload)
		if err != nil {
			return e, apierr.Errorf(apierr.EINVALIDENVELOPE, "migrate snapshot from schema version %d: %v", e.SchemaVersion, err)
		} else if !isJSONObject(payload) {
			return e, apierr.Errorf(apierr.EINVALIDENVELOPE, "migration from schema version %d did not produce a JSON object", e.SchemaVersion)
		}
		e.SchemaVersion++
		e.Payload, e.PayloadHash = payload, PayloadHash(payload)
	}
	return e, nil
}

// isJSONObject reports whether b is one valid JSON object.
func isJSONObject(b []byte) bool {
	t := bytes.TrimSpace(b)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

// CharacterStatePayload is the payload schema of a "character:<id>" partition (schema
// version 1). The store reads it to keep the character state table current.
type CharacterStatePayload struct {
	MapID      string          `json:"mapId"`
	InstanceID string          `json:"instanceId"`
	X          float64         `json:"x"`
	Y          float64         `json:"y"`
	Attributes json.RawMessage `json:"attributes,omitempty"`
}

// CharacterPartition is the name of characterID's snapshot partition
// ("character:<characterId>"): the one way a map names it, so the orchestrator, which
// reads it back with CharacterOfPartition, always recognises it.
func CharacterPartition(characterID string) string {
	return CharacterPartitionPrefix + characterID
}

// CharacterOfPartition returns the character id of a per-character snapshot partition
// ("character:<id>"); ok is false for every other partition, and for the bare prefix,
// which names no character. Every reader of a partition name asks it rather than cut
// the prefix itself, so all agree on which partitions are characters'.
func CharacterOfPartition(partition string) (characterID string, ok bool) {
	id, ok := strings.CutPrefix(partition, CharacterPartitionPrefix)
	return id, ok && id != ""
}

// ValidPartition reports whether partition may name a snapshot partition: a valid key
// (ValidKey) other than the bare CharacterPartitionPrefix, which would look like a
// character's partition and name none. Every other name that starts with the prefix
// names its character (CharacterOfPartition).
func ValidPartition(partition string) bool {
	return ValidKey(partition) && partition != CharacterPartitionPrefix
}
