package keys

import (
	"crypto/subtle"
	"encoding/base64"
)

// PurposeMetricsCredential derives the credential that opens the orchestrator's metrics
// routes and nothing else.
const PurposeMetricsCredential = "mapyard metrics credential v1"

// metricsCredentialPrefix marks a metrics credential, so one pasted in the wrong place
// is recognisable.
const metricsCredentialPrefix = "mt1."

// MetricsCredential returns the read-only credential of the orchestrator's metrics
// routes: its own /metrics, the discovery list of map metrics targets and the proxy to
// each map's metrics. Prometheus holds it (as a bearer token) instead of the root
// secret, so a leaked Prometheus configuration can read metrics but cannot create, stop
// or join anything. It is derived, so it changes only when the root is rotated.
func (r *Root) MetricsCredential() string {
	return metricsCredentialPrefix + base64.RawURLEncoding.EncodeToString(r.Derive(PurposeMetricsCredential))
}

// IsMetricsCredential reports, in constant time, whether presented is the metrics
// credential.
func (r *Root) IsMetricsCredential(presented string) bool {
	return subtle.ConstantTimeCompare([]byte(presented), []byte(r.MetricsCredential())) == 1
}
