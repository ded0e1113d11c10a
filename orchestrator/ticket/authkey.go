package ticket

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"

	"github.com/mapyard/mapyard/mapserver/kernel/apierr"
)

// AuthKey length bounds. 22 URL-safe characters hold 128 bits, the least a client-held
// identity should have; 128 leaves room for any client's format.
const (
	MinAuthKeyLen = 22
	MaxAuthKeyLen = 128
)

// KeyHasher turns a player's raw authKey into the keyed hash that is the only form of it
// mapyard ever stores, logs or compares. Keyed (HMAC with a key derived from the root
// secret) rather than a plain hash, so a leaked database cannot be brute-forced offline
// without the secret.
type KeyHasher struct {
	key []byte
}

// NewKeyHasher returns a KeyHasher with key, the authKey-hash key derived from the root
// secret (keys.Root.AuthKeyHashKey).
func NewKeyHasher(key []byte) *KeyHasher {
	return &KeyHasher{key: key}
}

// Hash validates authKey and returns its keyed hash, base64url without padding. An
// invalid key gets EBADREQUEST whose message never repeats the key.
func (k *KeyHasher) Hash(authKey string) (string, error) {
	if err := ValidateAuthKey(authKey); err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, k.key)
	m.Write([]byte(authKey))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
}

// ValidateAuthKey checks that authKey is 22 to 128 URL-safe characters (A-Z a-z 0-9 - _).
func ValidateAuthKey(authKey string) error {
	if n := len(authKey); n < MinAuthKeyLen || n > MaxAuthKeyLen {
		return apierr.Errorf(apierr.EBADREQUEST, "authKey must be %d to %d URL-safe characters (got %d characters)", MinAuthKeyLen, MaxAuthKeyLen, n)
	}
	for i := 0; i < len(authKey); i++ {
		c := authKey[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return apierr.Errorf(apierr.EBADREQUEST, "authKey must contain only URL-safe characters (A-Z a-z 0-9 - _); character %d is not", i+1)
		}
	}
	return nil
}
