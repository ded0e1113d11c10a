// Package ticket mints and verifies mapyard's one-time credentials: join tickets (enter
// a map), transfer tokens (move between maps) and rejoin credentials (come back to the
// session's character after its map crashed). All are compact, HMAC-SHA256 signed
// with a key derived from the orchestrator's root secret, short-lived, and carry a
// nonce that the orchestrator records when the credential is redeemed, so each is used
// at most once.
//
// A token is printable ASCII with its claims in the clear (they hold no secret: the
// subject is a keyed hash, never an authKey), separated by dots, then the signature:
//
//	mt1.<kind>.<id>.<subject>.<characterId>.<from>.<to>.<issuedAtMs>.<expiresAtMs>.<nonce>.<mac>
//
// Keeping the claims as plain substrings lets Verify run without allocating: the
// returned Claims point into the token string.
package ticket

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
)

// Kind says what a token admits to.
type Kind byte

// Token kinds.
const (
	KindJoin     Kind = 'j' // a join ticket: enter map To
	KindTransfer Kind = 't' // a transfer token: move from map From to map To
	// KindRejoin is a rejoin credential: get a new join ticket for the session's
	// character (Subject, CharacterID) wherever its lease is, after its map lost it.
	// It is presented to POST /api/v1/join, never to a map; From and To are "-".
	KindRejoin Kind = 'r'
)

// known reports whether k is a token kind.
func (k Kind) known() bool { return k == KindJoin || k == KindTransfer || k == KindRejoin }

const (
	prefix    = "mt1."
	macLen    = 43 // base64url, unpadded, of 32 bytes
	numFields = 9  // dot-separated claims between the prefix and the MAC
	// MaxLen bounds what Verify reads; anything longer is refused before any work.
	MaxLen = 512
)

// Claims are what a token asserts. Subject is the keyed hash of the player's authKey,
// or a disposable session id for players without one.
type Claims struct {
	Kind        Kind
	ID          string // joinId or transferId
	Subject     string
	CharacterID string
	From        string // source instance of a transfer; "-" for join tickets
	To          string // the instance the token admits to
	IssuedAtMs  int64
	ExpiresAtMs int64
	Nonce       string
}

// Signer mints and verifies tokens with one key. It is safe for concurrent use.
type Signer struct {
	key  []byte
	pool sync.Pool // of *macState; HMAC keying costs more than the MAC itself
}

// macState is a keyed HMAC with scratch space, pooled so that Verify allocates nothing.
type macState struct {
	h   hash.Hash
	buf []byte
	sum [sha256.Size]byte
}

// NewSigner returns a Signer with key, the ticket key derived from the root secret
// (keys.Root.TicketKey): only the orchestrator holds it, so nothing else can mint.
func NewSigner(key []byte) *Signer {
	s := &Signer{key: key}
	s.pool.New = func() any { return &macState{h: hmac.New(sha256.New, s.key), buf: make([]byte, 0, MaxLen)} }
	return s
}

// NewID returns a random URL-safe id of n random bytes, for token ids and nonces.
func NewID(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("ticket: crypto/rand failed: " + err.Error()) // never happens on supported systems
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// Mint signs c and returns the token. Fields must not be empty nor contain '.'; ids in
// mapyard never do, and Mint refuses them with EBADREQUEST rather than sign ambiguity.
func (s *Signer) Mint(c Claims) (string, error) {
	for _, f := range []string{c.ID, c.Subject, c.CharacterID, c.From, c.To, c.Nonce} {
		if f == "" || strings.IndexByte(f, '.') >= 0 {
			return "", apierr.Errorf(apierr.EBADREQUEST, "token claims must be non-empty and contain no '.'")
		}
	}
	if !c.Kind.known() {
		return "", apierr.Errorf(apierr.EBADREQUEST, "unknown token kind %q", c.Kind)
	}
	var b strings.Builder
	b.Grow(MaxLen / 2)
	b.WriteString(prefix)
	b.WriteByte(byte(c.Kind))
	for _, f := range []string{c.ID, c.Subject, c.CharacterID, c.From, c.To} {
		b.WriteByte('.')
		b.WriteString(f)
	}
	b.WriteByte('.')
	b.WriteString(strconv.FormatInt(c.IssuedAtMs, 10))
	b.WriteByte('.')
	b.WriteString(strconv.FormatInt(c.ExpiresAtMs, 10))
	b.WriteByte('.')
	b.WriteString(c.Nonce)
	body := b.String()
	var mac [macLen]byte
	s.mac(body, &mac)
	tok := body + "." + string(mac[:])
	if len(tok) > MaxLen {
		return "", apierr.Errorf(apierr.EBADREQUEST, "token longer than %d bytes", MaxLen)
	}
	return tok, nil
}

// mac writes the base64url HMAC of body to out.
func (s *Signer) mac(body string, out *[macLen]byte) {
	m := s.pool.Get().(*macState)
	m.h.Reset()
	m.buf = append(m.buf[:0], body...)
	m.h.Write(m.buf)
	base64.RawURLEncoding.Encode(out[:], m.h.Sum(m.sum[:0]))
	s.pool.Put(m)
}

// Verify checks tok's format and signature, then its expiry against now. It returns the
// claims, or ETICKETINVALID (malformed, forged, tampered, truncated) or ETICKETEXPIRED.
// It does not check one-time use: redeeming records the nonce (see the store).
func (s *Signer) Verify(tok string, now time.Time) (Claims, error) {
	var c Claims
	if len(tok) > MaxLen || !strings.HasPrefix(tok, prefix) {
		return c, errInvalid
	}
	cut := strings.LastIndexByte(tok, '.')
	if cut < 0 || len(tok)-cut-1 != macLen {
		return c, errInvalid
	}
	body, mac := tok[:cut], tok[cut+1:]
	var want [macLen]byte
	s.mac(body, &want)
	if !constantTimeEqual(want[:], mac) {
		return c, errInvalid
	}

	// The signature is good, so the body is what this orchestrator minted; parsing
	// still guards every field, as a key shared with an older version might not.
	var parts [numFields]string
	rest := body[len(prefix):]
	for i := range parts {
		j := strings.IndexByte(rest, '.')
		if i == len(parts)-1 {
			if j >= 0 {
				return c, errInvalid
			}
			parts[i] = rest
			break
		}
		if j < 0 {
			return c, errInvalid
		}
		parts[i], rest = rest[:j], rest[j+1:]
	}
	if len(parts[0]) != 1 || !Kind(parts[0][0]).known() {
		return c, errInvalid
	}
	var err1, err2 error
	c = Claims{
		Kind: Kind(parts[0][0]), ID: parts[1], Subject: parts[2], CharacterID: parts[3],
		From: parts[4], To: parts[5], Nonce: parts[8],
	}
	c.IssuedAtMs, err1 = strconv.ParseInt(parts[6], 10, 64)
	c.ExpiresAtMs, err2 = strconv.ParseInt(parts[7], 10, 64)
	if err1 != nil || err2 != nil || c.ID == "" || c.Nonce == "" || c.To == "" {
		return Claims{}, errInvalid
	}
	if now.UnixMilli() >= c.ExpiresAtMs {
		return c, errExpired
	}
	return c, nil
}

var (
	errInvalid = &apierr.Error{Code: apierr.ETICKETINVALID, Message: "ticket is malformed or its signature is wrong"}
	errExpired = &apierr.Error{Code: apierr.ETICKETEXPIRED, Message: "ticket has expired"}
)

// constantTimeEqual compares a MAC with a string without converting (and allocating)
// and without an early exit that would time out how many bytes matched.
func constantTimeEqual(a []byte, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var v byte
	for i := range a {
		v |= a[i] ^ b[i]
	}
	return v == 0
}
