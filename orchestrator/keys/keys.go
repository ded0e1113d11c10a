// Package keys derives every secret mapyard uses from one root secret that never leaves
// the orchestrator: the join-ticket signing key, the authKey-hash key, and the
// per-container credentials of map servers. Each is an HMAC-SHA256 of the root under its
// own purpose string, so holding one derived key reveals neither the root nor any other
// key, and nothing derived needs to be stored: the orchestrator recomputes a container's
// credentials from its instance id and generation (kept as a container label) after a
// restart.
//
// A map credential names who presents it, so the orchestrator knows which instance calls
// without a lookup table:
//
//	mc1.<instanceId>.<generation>.<mac>
//
// The orchestrator's credential towards one map container is opaque to the map, which
// only compares it (in constant time) with the value it was started with.
package keys

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
)

// Purposes of the derived keys. The first two are the derivations mapyard used before the
// root secret existed, unchanged, so a host that upgrades keeps its players' authKey
// hashes (and thus their characters) and its outstanding tickets. A purpose is never
// reused for another key.
const (
	PurposeTicket         = "mapyard ticket signing v1"
	PurposeAuthKeyHash    = "mapyard authkey hash v1"
	PurposeMapCredential  = "mapyard map credential v1"
	PurposeOrchCredential = "mapyard orchestrator-to-map credential v1"
	PurposeEdgeCredential = "mapyard edge credential v1"
	purposeKeyID          = "mapyard key id v1"
)

// MinRootLen is the shortest root secret accepted. A generated root has 43 characters
// (256 bits); an operator-provided one must still not be guessable.
const MinRootLen = 16

const (
	mapCredentialPrefix  = "mc1."
	orchCredentialPrefix = "oc1."
	edgeCredentialPrefix = "ec1."
	macLen               = 43 // base64url, unpadded, of 32 bytes
)

// generationPattern is what a container generation looks like: short, lower-case, and
// free of the '.' that separates a credential's fields.
var generationPattern = regexp.MustCompile(`^[a-z0-9]{1,32}$`)

// Root is the host's root secret and the keys derived from it. Only the orchestrator
// holds one; it is safe for concurrent use.
type Root struct {
	secret          []byte
	mapKey, orchKey []byte
	edge            string
}

// NewRoot returns the Root of secret (the stored secret file or ORCH_INTERNAL_RPC_SECRET).
func NewRoot(secret string) (*Root, error) {
	if len(secret) < MinRootLen {
		return nil, fmt.Errorf("root secret: must be at least %d characters", MinRootLen)
	}
	r := &Root{secret: []byte(secret)}
	r.mapKey, r.orchKey = r.Derive(PurposeMapCredential), r.Derive(PurposeOrchCredential)
	r.edge = edgeCredentialPrefix + base64.RawURLEncoding.EncodeToString(r.Derive(PurposeEdgeCredential))
	return r, nil
}

// Derive returns the 32-byte key of purpose: HMAC-SHA256(root, purpose).
func (r *Root) Derive(purpose string) []byte {
	m := hmac.New(sha256.New, r.secret)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// TicketKey is the key that signs join tickets and transfer tokens.
func (r *Root) TicketKey() []byte { return r.Derive(PurposeTicket) }

// AuthKeyHashKey is the key of the keyed hash stored in place of players' authKeys.
func (r *Root) AuthKeyHashKey() []byte { return r.Derive(PurposeAuthKeyHash) }

// KeyID is a short public fingerprint of the root: containers are labelled with it, so a
// restarted orchestrator knows whether a container's credentials came from its own root
// (adopt it) or from an earlier one, or from a version without credentials (replace
// it). It reveals nothing about the root.
func (r *Root) KeyID() string { return hex.EncodeToString(r.Derive(purposeKeyID)[:6]) }

// IsRoot reports, in constant time, whether presented is the root secret itself: the
// credential of the admin API on the loopback control listener, which only whoever can
// read the orchestrator's data directory holds.
func (r *Root) IsRoot(presented string) bool {
	return subtle.ConstantTimeCompare([]byte(presented), r.secret) == 1
}

// EdgeCredential is the edge's credential: it opens the two control routes the edge
// needs (the route-table watch and join forwarding) and nothing else, so the edge
// never holds the root. The orchestrator writes it where the edge reads it
// (ORCH_EDGE_CREDENTIAL_FILE); it changes only with the root.
func (r *Root) EdgeCredential() string { return r.edge }

// IsEdge reports, in constant time, whether presented is the edge credential.
func (r *Root) IsEdge(presented string) bool {
	return subtle.ConstantTimeCompare([]byte(presented), []byte(r.edge)) == 1
}

// Identity is who a map credential speaks for: one map instance as run by one container.
// Generation changes every time the instance gets a new container, so the credential of
// a replaced container stops working when its successor starts.
type Identity struct {
	InstanceID string
	Generation string
}

// String is the identity as logs show it.
func (id Identity) String() string { return id.InstanceID + "@" + id.Generation }

// NewGeneration returns a fresh random generation for a new container.
func NewGeneration() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("keys: crypto/rand failed: " + err.Error()) // never happens on supported systems
	}
	return hex.EncodeToString(b[:])
}

// ValidGeneration reports whether g can be a generation (as read back from a label).
func ValidGeneration(g string) bool { return generationPattern.MatchString(g) }

func (id Identity) validate() error {
	if !record.ValidName(id.InstanceID) {
		return fmt.Errorf("identity: instance id %q must be %s", id.InstanceID, record.IDRule)
	}
	if !ValidGeneration(id.Generation) {
		return fmt.Errorf("identity: generation %q must be %s", id.Generation, generationPattern)
	}
	return nil
}

// mac is the base64url HMAC of the identity under key. The NUL cannot occur in either
// field, so no two identities share an input.
func mac(key []byte, id Identity) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id.InstanceID))
	m.Write([]byte{0})
	m.Write([]byte(id.Generation))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// MapCredential returns the credential the container of id presents on every call to
// the orchestrator's /orch/* routes. It is all a map container holds: it proves who the
// caller is and nothing more.
func (r *Root) MapCredential(id Identity) (string, error) {
	if err := id.validate(); err != nil {
		return "", err
	}
	return mapCredentialPrefix + id.InstanceID + "." + id.Generation + "." + mac(r.mapKey, id), nil
}

// VerifyMapCredential checks a presented map credential and returns the identity it
// speaks for. The MAC is compared in constant time. It says nothing about whether that
// generation is still the instance's current container: the caller asks the supervisor.
// Error code: EUNAUTHORIZED.
func (r *Root) VerifyMapCredential(cred string) (Identity, error) {
	rest, ok := strings.CutPrefix(cred, mapCredentialPrefix)
	if !ok || len(rest) > 128 {
		return Identity{}, errBadCredential
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 || len(parts[2]) != macLen {
		return Identity{}, errBadCredential
	}
	id := Identity{InstanceID: parts[0], Generation: parts[1]}
	if id.validate() != nil {
		return Identity{}, errBadCredential
	}
	if subtle.ConstantTimeCompare([]byte(mac(r.mapKey, id)), []byte(parts[2])) != 1 {
		return Identity{}, errBadCredential
	}
	return id, nil
}

// OrchCredential returns the credential the orchestrator presents on calls to the
// control routes of the container of id. The container gets it in its environment and
// answers control calls only when it is presented; the credential of one container opens
// no other, so a map holding its own cannot drive another map.
func (r *Root) OrchCredential(id Identity) (string, error) {
	if err := id.validate(); err != nil {
		return "", err
	}
	return orchCredentialPrefix + mac(r.orchKey, id), nil
}

var errBadCredential = &apierr.Error{Code: apierr.EUNAUTHORIZED, Message: "missing or invalid map credential"}
