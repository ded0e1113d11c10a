package httpapi

// The admin API on the control listener, for operators with the root secret: maps
// (create, list, restart, stop, release from quarantine), player sessions, the
// cleanup of stale state, characters, and the critical-item policies with their
// recovery audit (see docs/operations.md).
const (
	PathAdminMaps           = "/admin/maps"
	PathAdminSessions       = "/admin/sessions"
	PathAdminCleanup        = "/admin/cleanup"
	PathAdminCharacters     = "/admin/characters"
	PathAdminItemPolicies   = "/admin/item-policies"
	PathAdminItemRecoveries = "/admin/item-recoveries"
)
