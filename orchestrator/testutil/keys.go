package testutil

import (
	"testing"

	"github.com/mapyard/mapyard/orchestrator/keys"
)

// Root returns the root of secret, failing the test if the secret is too short: the
// root a test's orchestrator would derive its keys and credentials from.
func Root(tb testing.TB, secret string) *keys.Root {
	tb.Helper()
	r, err := keys.NewRoot(secret)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}
